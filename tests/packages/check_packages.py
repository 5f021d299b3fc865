#!/usr/bin/env python3
"""Installs turnstile's Debian packages into a throwaway root and uses them.

    check_packages.py --packages-dir D --consumer tests/consumers/consumer.cpp

Run by `./dev package --check` after `dpkg-buildpackage` (debian/):

1. Every expected package is in D (one .deb each, plus -dbgsym ones);
   `turnstile`'s Depends name no Lua, Boost or libturnstile-sim.
2. Each non-dbgsym package is unpacked with `dpkg -x` into a fresh root
   (no dpkg database, no root needed); the libraries are found through
   LD_LIBRARY_PATH.
3. The installed `turnstile` is under 5 MB (stripped) and loads no Lua,
   Boost or libturnstile_sim (ldd); `turnstile --version` prints the
   package's version; `turnstile sim --list` finds /usr/libexec/turnstile/
   turnstile-sim inside the root.
4. Against a real redis-server on a free loopback port (stopped by its
   PID): `turnstile run NAME -- true` exits 0 and `turnstile status NAME`
   shows nothing held afterwards.
   The man page, the bash and zsh completions and the docs the man page
   names (/usr/share/doc/turnstile) are installed.
5. consumer.cpp is compiled with `pkg-config --cflags --libs turnstile-sim`
   from the root's .pc files alone (PKG_CONFIG_LIBDIR), which must give
   nothing but turnstile's own flags, and run against the same
   redis-server.

Prints what it does; exits 1 naming the first step that failed.
"""

import argparse
import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "consumers"))
from run_consumers import Failure, in_scratch, own_flags, redis_server, run  # noqa: E402

PACKAGES = ("libturnstile0", "libturnstile-dev", "libturnstile-sim0", "libturnstile-sim-dev", "turnstile",
            "turnstile-sim")
# The `turnstile` package must not bring the simulator's dependencies.
CLI_FORBIDDEN_DEPENDS = ("lua", "boost", "libturnstile-sim")
CLI_MAX_BYTES = 5 * 1024 * 1024
SIMULATOR_LIBRARIES = ("libturnstile_sim.so", "liblua", "libboost_")


def package_files(directory):
    found = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.deb"))):
        name = os.path.basename(path).split("_")[0]
        found.setdefault(name, []).append(path)
    missing = [name for name in PACKAGES if len(found.get(name, [])) != 1]
    if missing:
        raise Failure(f"{directory} does not hold exactly one .deb of {missing} (found {sorted(found)})")
    print(f"packages: {', '.join(sorted(found))}", flush=True)
    return found


def check_cli_depends(deb):
    depends = run(["dpkg-deb", "--field", deb, "Depends"]).strip()
    bad = [word for word in CLI_FORBIDDEN_DEPENDS if word in depends]
    if bad:
        raise Failure(f"the turnstile package depends on {bad}: {depends}")
    print(f"turnstile Depends: {depends}", flush=True)
    return run(["dpkg-deb", "--field", deb, "Version"]).strip()


def unpack(found, root):
    for name in PACKAGES:
        run(["dpkg", "-x", found[name][0], root])


def multiarch_libdir(root):
    candidates = glob.glob(os.path.join(root, "usr", "lib", "*", "libturnstile.so.0"))
    if len(candidates) != 1:
        raise Failure(f"libturnstile.so.0 is not in one usr/lib/<triplet> of the root: {candidates}")
    return os.path.dirname(candidates[0])


def check_cli(root, env, version):
    program = os.path.join(root, "usr", "bin", "turnstile")
    size = os.path.getsize(program)
    print(f"installed usr/bin/turnstile: {size} bytes", flush=True)
    if size >= CLI_MAX_BYTES:
        raise Failure(f"usr/bin/turnstile is {size} bytes, not under {CLI_MAX_BYTES}")
    loaded = run(["ldd", program], env=env)
    bad = [line.strip() for line in loaded.splitlines() if any(name in line for name in SIMULATOR_LIBRARIES)]
    if bad:
        raise Failure(f"the installed turnstile loads the simulator's libraries: {bad}")
    if root not in next((line for line in loaded.splitlines() if "libturnstile.so" in line), ""):
        raise Failure("the installed turnstile does not load libturnstile from the root")
    printed = run([program, "--version"], env=env).strip()
    upstream = version.split("-")[0]
    if printed != f"turnstile {upstream}":
        raise Failure(f"turnstile --version printed {printed!r}, expected 'turnstile {upstream}'")
    if run([program, "run", "--version"], env=env).strip() != printed:
        raise Failure("turnstile run --version did not print the version")
    if "contention" not in run([program, "sim", "--list"], env=env):
        raise Failure("turnstile sim --list did not list the scenarios")
    print(f"installed CLI: {printed}; turnstile sim runs the root's turnstile-sim", flush=True)
    # The man page (dh_compress gzips it) and both completions.
    shipped = {
        "man page": ["usr/share/man/man1/turnstile.1.gz", "usr/share/man/man1/turnstile.1"],
        "bash completion": ["usr/share/bash-completion/completions/turnstile"],
        "zsh completion": ["usr/share/zsh/vendor-completions/_turnstile"],
        # What the man page's SEE ALSO points to (dh_installdocs may gzip).
        "CLI guide": ["usr/share/doc/turnstile/cli.md", "usr/share/doc/turnstile/cli.md.gz"],
        "safety model": ["usr/share/doc/turnstile/safety.md", "usr/share/doc/turnstile/safety.md.gz"],
    }
    for what, paths in shipped.items():
        if not any(os.path.isfile(os.path.join(root, path)) for path in paths):
            raise Failure(f"the turnstile package has no {what} ({' or '.join(paths)})")
    print("installed: man page, bash and zsh completion, the CLI guide and the safety model", flush=True)
    return program


def check_against_redis(program, env, consumer_program, url):
    name = "packages:check"
    run([program, "run", "--redis", url, name, "--", "true"], env=env)
    status = json.loads(run([program, "status", "--json", "--redis", url, name], env=env))
    if status.get("flavor") is not None or status.get("holder_count") != 0:
        raise Failure(f"after `turnstile run {name} -- true`, {name} is not free: {status}")
    output = run([consumer_program, url], env=env)
    if output.count(": kept out while held: yes, got in after: yes") != 2:
        raise Failure("the pkg-config consumer printed something else than two successes")


def check_packages(args, work):
    found = package_files(args.packages_dir)
    version = check_cli_depends(found["turnstile"][0])
    root = os.path.join(work, "root")
    unpack(found, root)
    libdir = multiarch_libdir(root)
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    env.pop("TURNSTILE_EXEC_PATH", None)
    program = check_cli(root, env, version)

    pkgconfig_dir = os.path.join(libdir, "pkgconfig")
    own_flags("turnstile", pkgconfig_dir, root)
    flags = own_flags("turnstile-sim", pkgconfig_dir, root)
    consumer_program = os.path.join(work, "consumer")
    run([args.cxx, "-std=c++20", args.consumer, "-o", consumer_program] + flags)

    with redis_server(work) as url:
        check_against_redis(program, env, consumer_program, url)
    print("packages: unpacked, turnstile ran, a pkg-config consumer built and ran", flush=True)
    return 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--packages-dir", required=True)
    parser.add_argument("--consumer", required=True)
    parser.add_argument("--cxx", default="c++")
    args = parser.parse_args()
    return in_scratch("turnstile-packages-", "check_packages", lambda work: check_packages(args, work))


if __name__ == "__main__":
    sys.exit(main())
