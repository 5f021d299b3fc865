#!/usr/bin/env python3
"""`turnstile --completion bash|zsh`: the generated scripts complete what
the command line defines. Bash: the script is sourced and _turnstile called
with COMP_WORDS as bash would set them; each case names the words and what
COMPREPLY must (or must not) hold. Zsh: `zsh -n` parses the script (zsh is
one of ./dev's packages).

Usage: check_completion.py TURNSTILE
"""
import subprocess
import sys
import tempfile

# (words typed, the word being completed last; must contain; must not contain)
BASH_CASES = [
    (["turnstile", ""], {"run", "status", "ls", "unlock", "semaphore", "sim", "--completion"}, set()),
    (["turnstile", "st"], {"status"}, {"run"}),
    (["turnstile", "run", "--wa"], {"--wait"}, {"--watch"}),
    (["turnstile", "run", "-"], {"-w", "-c", "--fair", "--metrics-textfile", "--allow-evicting"}, {"--json"}),
    (["turnstile", "status", "--w"], {"--watch"}, {"--wait"}),
    (["turnstile", "status", "--flavor", "re"], {"reentrant", "read-write", "redlock"}, {"fair"}),
    (["turnstile", "status", "--lock", "re"], {"reentrant", "read-write", "redlock"}, {"fair"}),  # its other name
    (["turnstile", "unlock", "--lock", "f"], {"fair"}, {"reentrant"}),
    (["turnstile", "ls", "--"], {"--json", "--limit", "--redis"}, {"--wait"}),
    (["turnstile", "semaphore", "--re"], {"--release", "--reset", "--redis"}, set()),
    (["turnstile", "run", "--wait", ""], set(), {"--fair"}),  # a value: nothing offered
    (["turnstile", "run", "name", "--", "-"], set(), {"--fair"}),  # the command's own words
]


def bash_reply(script_path, words):
    line = " ".join("'" + word.replace("'", "'\\''") + "'" for word in words)
    program = (f"source '{script_path}'; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
               "_turnstile; printf '%s\\n' \"${COMPREPLY[@]}\"")
    result = subprocess.run(["bash", "--norc", "-c", program], capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise RuntimeError(f"bash failed for {words}: {result.stderr}")
    return {word for word in result.stdout.split("\n") if word}


def main():
    turnstile = sys.argv[1]
    failures = []
    bash = subprocess.run([turnstile, "--completion", "bash"], capture_output=True, text=True, timeout=30)
    if bash.returncode != 0:
        print(f"--completion bash exited {bash.returncode}: {bash.stderr}")
        return 1
    with tempfile.NamedTemporaryFile("w", suffix=".bash") as script:
        script.write(bash.stdout)
        script.flush()
        for words, wanted, unwanted in BASH_CASES:
            reply = bash_reply(script.name, words)
            if not wanted <= reply or reply & unwanted:
                failures.append(f"{words}: got {sorted(reply)}; wanted {sorted(wanted)}, not {sorted(unwanted)}")
    zsh = subprocess.run([turnstile, "--completion", "zsh"], capture_output=True, text=True, timeout=30)
    if zsh.returncode != 0 or not zsh.stdout.startswith("#compdef turnstile\n"):
        failures.append(f"--completion zsh: exit {zsh.returncode}, {zsh.stdout[:40]!r}")
    else:
        parsed = subprocess.run(["zsh", "-n"], input=zsh.stdout, capture_output=True, text=True, timeout=30)
        if parsed.returncode != 0:
            failures.append(f"zsh -n: {parsed.stderr}")
        # Every name of the flavor option offers the flavors, not files.
        for name in ("--flavor", "--lock"):
            specs = [line for line in zsh.stdout.split("\n") if line.strip().startswith(f"'{name}[")]
            if not specs or any(":flavor:(" not in spec for spec in specs):
                failures.append(f"zsh: {name} does not complete the flavors: {specs[:2]}")
    refused = subprocess.run([turnstile, "--completion", "fish"], capture_output=True, text=True, timeout=30)
    if refused.returncode != 64:
        failures.append(f"--completion fish: exit {refused.returncode}, expected 64")
    for failure in failures:
        print(failure)
    print(f"completion: {len(BASH_CASES)} bash cases, zsh parsed; {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
