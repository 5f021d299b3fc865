#!/usr/bin/env python3
"""The lean CLI: `turnstile` loads libturnstile, not the simulator.

    check_cli_links.py TURNSTILE TURNSTILE_SIM

Fails (exit 1, naming the library) when `ldd TURNSTILE` (every library the
loader maps for it, not only its own NEEDED entries) shows
libturnstile_sim, Lua or Boost, or does not show libturnstile; and, so that
the check is seen to detect them, when TURNSTILE_SIM does not load
libturnstile_sim and Lua.
"""

import re
import subprocess
import sys

# Libraries the simulator brings (src/meson.build: turnstile_sim_lib_deps).
SIMULATOR_ONLY = (r"libturnstile_sim\.so", r"liblua", r"libboost_")


def loaded(program):
    output = subprocess.run(["ldd", program], check=True, capture_output=True, text=True).stdout
    return [line.split()[0] for line in output.splitlines() if line.strip()]


def matching(libraries, pattern):
    return [library for library in libraries if re.match(pattern, library)]


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    turnstile, turnstile_sim = sys.argv[1], sys.argv[2]
    problems = []
    cli_libraries = loaded(turnstile)
    for pattern in SIMULATOR_ONLY:
        problems += [f"turnstile loads {library}" for library in matching(cli_libraries, pattern)]
    if not matching(cli_libraries, r"libturnstile\.so"):
        problems.append(f"turnstile does not load libturnstile: {cli_libraries}")
    sim_libraries = loaded(turnstile_sim)
    for pattern in (r"libturnstile_sim\.so", r"liblua"):
        if not matching(sim_libraries, pattern):
            problems.append(f"turnstile-sim loads nothing like {pattern} (is the check blind?): {sim_libraries}")
    for problem in problems:
        print(f"check_cli_links: {problem}")
    if not problems:
        print(f"check_cli_links: turnstile loads {len(cli_libraries)} libraries, none of the simulator's")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
