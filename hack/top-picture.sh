#!/usr/bin/env bash
# hack/top-picture.sh CAPTURE OUT.png: draws a pane of `sluice top` that
# `tmux capture-pane -p` captured (test/top logs the screen of a blocked
# drain) as a PNG, with the headless Chromium the timeline's test uses, in
# the colours sluice top uses (alerts red, work under way yellow, titles
# bold). The README's picture, docs/images/top.png, is drawn so.
set -euo pipefail
capture="$(realpath "$1")"
out="$(realpath "$2")"
cd "$(dirname "$0")/.."
browser="$(hack/tools/chromium.sh)"
work="$(mktemp -d)"
trap 'rm -rf "$work" "$squeezed"' EXIT
squeezed="$(mktemp)"
cat -s "$capture" >"$squeezed"
capture="$squeezed"
lines="$(wc -l <"$capture")"
{
  cat <<'HEAD'
<!doctype html><meta charset="utf-8"><style>
body{margin:0;background:#1e1e1e}
pre{margin:0;padding:12px;font:14px/18px "DejaVu Sans Mono",monospace;color:#d4d4d4}
.t{font-weight:bold;color:#fff}.a{color:#f14c4c;font-weight:bold}.w{color:#e5e510}.d{color:#808080}.s{background:#d4d4d4;color:#1e1e1e}
</style><pre>
HEAD
  sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' "$capture" | awk '
    /^&lt;enter&gt;|^&lt;esc&gt;/              { print "<span class=d>" $0 "</span>"; next }
    events                                    { print; next }
    /^LAST EVENTS/                            { events = 1 }
    /^&gt; /                                  { print "<span class=s>" $0 "</span>"; next }
    /^sluice top|^POOL|^NO POOL|^LAST EVENTS/ { print "<span class=t>" $0 "</span>"; next }
    /^!| blocked | not-ready /               { print "<span class=a>" $0 "</span>"; next }
    / draining | replacing | booting | cordoned | deleting |^  maintenance/ { print "<span class=w>" $0 "</span>"; next }
    /^  next window/                          { print "<span class=d>" $0 "</span>"; next }
    { print }'
  echo "</pre>"
} >"$work/top.html"
height=$(( lines * 18 + 24 ))
"$browser" --headless --no-sandbox --disable-gpu --no-first-run --disable-dev-shm-usage \
  --user-data-dir="$work/profile" --hide-scrollbars --window-size="1400,$height" \
  --screenshot="$out" "file://$work/top.html" >/dev/null 2>&1
echo "$out"
