#!/usr/bin/env bash
# download_model.sh — download a FLUX.2-klein model from Hugging Face (only the
# files flux.c reads), into a folder with the official layout.
#
#   tools/download_model.sh [DIR] [--base]
#
#   DIR     destination (default models/FLUX.2-klein-4B, or models/FLUX.2-klein-base-4B with --base)
#   --base  the undistilled base model (50 steps, real CFG) instead of the distilled one
#
# FLUX.2-klein-4B and -base-4B are Apache-2.0 and need no login (~16 GB each:
# transformer 7.75 GB, Qwen3-4B text encoder 8.05 GB, VAE 168 MB). Gated repos
# (e.g. the 9B models) need a token in HF_TOKEN. Downloads resume where they
# stopped; a file is moved into place only when complete, so re-running the
# script after an interruption is safe.
set -euo pipefail

REPO=black-forest-labs/FLUX.2-klein-4B
DIR=
for a in "$@"; do
    case "$a" in
        --base) REPO=black-forest-labs/FLUX.2-klein-base-4B ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "download_model: unknown option $a" >&2; exit 1 ;;
        *) DIR=$a ;;
    esac
done
DIR=${DIR:-models/${REPO#*/}}
BASE_URL="https://huggingface.co/$REPO/resolve/main"

if ! command -v curl >/dev/null 2>&1; then
    echo "download_model: curl is needed (apt-get install curl)" >&2
    exit 1
fi
AUTH=()
if [ -n "${HF_TOKEN:-}" ]; then AUTH=(-H "Authorization: Bearer $HF_TOKEN"); fi

fetch() {  # repo-relative path
    local path=$1 dest="$DIR/$1"
    if [ -s "$dest" ]; then echo "  have  $path"; return; fi
    mkdir -p "$(dirname "$dest")"
    echo "  get   $path"
    curl -L --fail --retry 5 --retry-delay 3 -C - "${AUTH[@]}" -o "$dest.part" "$BASE_URL/$path"
    mv "$dest.part" "$dest"
}

echo "download_model: $REPO -> $DIR"
for f in model_index.json \
         scheduler/scheduler_config.json \
         tokenizer/tokenizer.json tokenizer/tokenizer_config.json \
         transformer/config.json transformer/diffusion_pytorch_model.safetensors \
         vae/config.json vae/diffusion_pytorch_model.safetensors \
         text_encoder/config.json text_encoder/model.safetensors.index.json; do
    fetch "$f"
done
# The text encoder shards are whatever its index lists.
shards=$(grep -o '"model-[0-9]*-of-[0-9]*\.safetensors"' "$DIR/text_encoder/model.safetensors.index.json" \
         | tr -d '"' | sort -u)
if [ -z "$shards" ]; then
    echo "download_model: no shard names in text_encoder/model.safetensors.index.json" >&2
    exit 1
fi
for s in $shards; do fetch "text_encoder/$s"; done

echo "download_model: done. Try:  flux -d $DIR -p \"a cat\" -o cat.png"
