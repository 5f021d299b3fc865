#!/usr/bin/env python3
"""The man page built from `turnstile --help-all` (src/cli/share): a page
help2man made, naming every command, the exit statuses and the sections
of turnstile.h2m.

Usage: check_man_page.py TURNSTILE.1
"""
import sys

WANTED = [
    ".TH TURNSTILE \"1\"",
    "run", "status", "ls", "unlock", "semaphore", "sim",
    "\\-\\-wait", "\\-\\-metrics\\-textfile",
    "Exit status",
    "EXAMPLES", "ENVIRONMENT", "SEE ALSO", "TURNSTILE_REDIS_PASSWORD",
]


def main():
    with open(sys.argv[1], encoding="utf-8") as page:
        text = page.read()
    missing = [word for word in WANTED if word not in text]
    for word in missing:
        print(f"{sys.argv[1]}: no {word!r}")
    print(f"man page: {len(WANTED)} checks, {len(missing)} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
