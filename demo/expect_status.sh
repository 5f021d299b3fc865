#!/bin/sh
# Runs a command and succeeds only if it exits with the expected status:
#   expect_status.sh <status> <program> [args...]
expected=$1
shift
"$@" >/dev/null
status=$?
if [ "$status" -ne "$expected" ]; then
  echo "expected exit status $expected, got $status: $*" >&2
  exit 1
fi
