#!/bin/sh
# Runs a command that must exit 0 and print a line containing a text:
#   expect_line.sh <text> <program> [args...]
expected=$1
shift
output=$("$@")
status=$?
if [ "$status" -ne 0 ]; then
  echo "expected exit status 0, got $status: $*" >&2
  exit 1
fi
if ! printf '%s\n' "$output" | grep -qF -- "$expected"; then
  printf 'no line contains "%s" in the output of: %s\n%s\n' "$expected" "$*" "$output" >&2
  exit 1
fi
