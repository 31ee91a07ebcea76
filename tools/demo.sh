#!/usr/bin/env bash
# demo.sh — `make demo`: text-to-image end to end on a small generated model.
#
# 1. tools/gen_model writes a small random-weight model in the official
#    FLUX.2-klein folder layout to demo-model/ (with the real Qwen3 tokenizer
#    fetched by `make fixtures`).
# 2. flux -d demo-model -p "a cat" -o demo.png runs the whole pipeline:
#    tokenizer → Qwen3 → transformer (4 Euler steps) → VAE → PNG.
# Random weights make noise, not a cat: this shows the engine runs, not what the
# model can draw. tools/download_model.sh fetches the real weights.
set -euo pipefail
cd "$(dirname "$0")/.."

FLUX_BIN=${FLUX_BIN:-./flux}
GEN_MODEL=${FLUX_TOOLS:-build/cc/tools}/gen_model
MODEL=demo-model
OUT=demo.png
TOKENIZER=tests/fixtures/qwen3-tokenizer.json

for f in "$FLUX_BIN" "$GEN_MODEL"; do
    if [ ! -x "$f" ]; then
        echo "demo: $f is missing: run 'make demo' (it builds the CLI and the tools first)" >&2
        exit 1
    fi
done
if [ ! -f "$TOKENIZER" ]; then
    echo "demo: $TOKENIZER is missing: run 'make fixtures' (needs npm)" >&2
    exit 1
fi

echo "demo: generating a small random-weight model in the official layout -> $MODEL/"
"$GEN_MODEL" --preset tiny --seed 42 -o "$MODEL" --tokenizer "$TOKENIZER" --link-tokenizer

echo "demo: $FLUX_BIN -d $MODEL -p \"a cat\" -o $OUT"
set +e
"$FLUX_BIN" -d "$MODEL" -p "a cat" -o "$OUT"
status=$?
set -e
if [ $status -ne 0 ]; then
    echo "demo: flux failed (exit status $status)" >&2
    exit $status
fi

echo
echo "demo: wrote $OUT from a model with RANDOM weights: expect coloured noise, not a cat."
echo "demo: for real images download FLUX.2-klein-4B (Apache-2.0, ~16 GB, no login):"
echo "demo:     tools/download_model.sh models/FLUX.2-klein-4B"
echo "demo:     $FLUX_BIN -d models/FLUX.2-klein-4B -p \"a cat\" -o cat.png"
