#!/usr/bin/env bash
# Checks, before `make test` spends 20 minutes, that the tools which cannot be
# built from Go modules are on this machine, and names what is missing and how
# to get it. Our machines (CI's included) carry Python 3.11 with moto 5.2.1.
set -euo pipefail
missing=0
if ! command -v moto_server >/dev/null 2>&1; then
  echo "make test: moto_server is missing (the AWS emulator the aws-asg provider's tests run against): python3 -m pip install 'moto[server]==5.2.1'" >&2
  missing=1
elif ! ver=$(python3 -c 'import moto; print(moto.__version__)' 2>/dev/null); then
  echo "make test: moto_server is on the PATH but python3 cannot import moto: python3 -m pip install 'moto[server]==5.2.1'" >&2
  missing=1
elif [[ "$ver" != 5.2.* ]]; then
  echo "make test: warning: moto $ver, the tests were written against 5.2.1" >&2
fi
if ! command -v tmux >/dev/null 2>&1; then
  echo "make test: tmux is missing (the test of sluice top runs it in a detached tmux session): apt-get install tmux" >&2
  missing=1
fi
exit "$missing"
