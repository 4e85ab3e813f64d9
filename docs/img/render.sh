#!/usr/bin/env bash
# Regenerate the pictures of docs/pictures.md: `ringtree trace --svg`, then a PNG of each
# SVG at its own size from headless Chromium. Run from anywhere; needs .venv and chromium.
set -euo pipefail
cd "$(dirname "$0")/../.."
RT=.venv/bin/ringtree
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

png() {  # png FILE.svg OUT.png
  local size
  size=$(.venv/bin/python -c 'import sys, xml.etree.ElementTree as ET
r = ET.parse(sys.argv[1]).getroot()
print("%.0f,%.0f" % (float(r.get("width")), float(r.get("height"))))' "$1")
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$tmp/profile" --hide-scrollbars --force-device-scale-factor=1 \
    --window-size="$size" --screenshot="$2" "file://$(readlink -f "$1")" 2>/dev/null
  echo "wrote $2 ($size px, $(($(stat -c %s "$2") / 1024)) KiB)"
}

$RT trace all-reduce -n 4 --svg "$tmp/ring.svg" >/dev/null 2>&1
png "$tmp/ring.svg" docs/img/ring-all-reduce-4.png
# the tree algorithms come with the algorithms branch
if $RT trace all-reduce -n 7 --algorithm tree --svg "$tmp/tree.svg" >/dev/null 2>&1; then
  png "$tmp/tree.svg" docs/img/tree-all-reduce-7.png
else
  echo "skipped docs/img/tree-all-reduce-7.png: no tree algorithm in this checkout"
fi
