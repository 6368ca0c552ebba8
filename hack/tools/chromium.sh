#!/usr/bin/env bash
# Prints the path of a headless-capable Chromium, for the timeline's browser
# test. It is the one test tool Go cannot build: Debian's `chromium` package
# is installed with apt-get when none is found (as root, as on our machines
# and CI); otherwise it says what to install.
set -euo pipefail
if [[ -n "${SLUICE_CHROMIUM:-}" ]]; then
  echo "$SLUICE_CHROMIUM"
  exit 0
fi
find_it() {
  for name in chromium chromium-browser google-chrome; do
    if command -v "$name" >/dev/null 2>&1; then
      command -v "$name"
      return 0
    fi
  done
  return 1
}
if find_it; then
  exit 0
fi
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "chromium.sh: installing Debian's chromium for the timeline's browser test" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2 ||
    { apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2; }
  find_it && exit 0
fi
echo "chromium.sh: no Chromium found; install it (apt-get install chromium) or set SLUICE_CHROMIUM" >&2
exit 1
