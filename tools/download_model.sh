#!/usr/bin/env bash
# download_model.sh — download a FLUX.2-klein model from Hugging Face (only the
# files flux.c reads), into a folder with the official layout.
#
#   tools/download_model.sh [DIR] [--9b] [--base] [--minimal]
#
#   DIR        destination (default models/<repo name>, e.g. models/FLUX.2-klein-4B)
#   --9b       the 9B model (Qwen3-8B text encoder) instead of the 4B
#   --base     the undistilled base model (50 steps, real CFG) instead of the distilled one
#   --minimal  only the configs, the tokenizer and the VAE (~170 MB): what a ComfyUI
#              user needs beside the transformer and text encoder files they have
#              (flux -d DIR --transformer T --text-encoder TE ...)
#
# FLUX.2-klein-4B and -base-4B are Apache-2.0 and need no login (~16 GB each:
# transformer 7.75 GB, Qwen3-4B text encoder 8.05 GB, VAE 168 MB). The 9B repos
# are gated (accept the license on huggingface.co, then put a token in HF_TOKEN).
# Downloads resume where they stopped; a file is moved into place only when
# complete, so re-running the script after an interruption is safe. HF_ENDPOINT
# replaces https://huggingface.co (a mirror), as for huggingface_hub.
set -euo pipefail

SIZE=4B VARIANT= MINIMAL=0 DIR=
for a in "$@"; do
    case "$a" in
        --base) VARIANT=base- ;;
        --9b|--9B) SIZE=9B ;;
        --minimal) MINIMAL=1 ;;
        -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "download_model: unknown option $a (see --help)" >&2; exit 1 ;;
        *) DIR=$a ;;
    esac
done
REPO=black-forest-labs/FLUX.2-klein-$VARIANT$SIZE
DIR=${DIR:-models/${REPO#*/}}
BASE_URL="${HF_ENDPOINT:-https://huggingface.co}/$REPO/resolve/main"

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
    if ! curl -L --fail --retry 5 --retry-delay 3 -C - "${AUTH[@]}" -o "$dest.part" "$BASE_URL/$path"; then
        if [ "$SIZE" = 9B ] && [ -z "${HF_TOKEN:-}" ]; then
            echo "download_model: $REPO is gated: accept its license on huggingface.co and set HF_TOKEN" >&2
        fi
        exit 1
    fi
    mv "$dest.part" "$dest"
}

# 0 if the repo has this file (a HEAD request), else 1.
exists() {
    curl -sIL --fail "${AUTH[@]}" -o /dev/null "$BASE_URL/$1"
}

# The shards a component's index lists, fetched.
fetch_shards() {  # component, index file name, shard name pattern
    local index="$DIR/$1/$2" shards
    shards=$(grep -o "\"$3\"" "$index" | tr -d '"' | sort -u)
    if [ -z "$shards" ]; then
        echo "download_model: no shard names in $1/$2" >&2
        exit 1
    fi
    for s in $shards; do fetch "$1/$s"; done
}

echo "download_model: $REPO -> $DIR$([ $MINIMAL = 1 ] && echo ' (configs, tokenizer, VAE)')"
for f in model_index.json \
         scheduler/scheduler_config.json \
         tokenizer/tokenizer.json tokenizer/tokenizer_config.json \
         transformer/config.json text_encoder/config.json \
         vae/config.json vae/diffusion_pytorch_model.safetensors; do
    fetch "$f"
done
if [ $MINIMAL = 0 ]; then
    # the transformer: one file, or shards behind an index (the 9B)
    if [ -s "$DIR/transformer/diffusion_pytorch_model.safetensors.index.json" ] ||
       { [ ! -s "$DIR/transformer/diffusion_pytorch_model.safetensors" ] &&
         exists transformer/diffusion_pytorch_model.safetensors.index.json; }; then
        fetch transformer/diffusion_pytorch_model.safetensors.index.json
        fetch_shards transformer diffusion_pytorch_model.safetensors.index.json \
                     'diffusion_pytorch_model-[0-9]*-of-[0-9]*\.safetensors'
    else
        fetch transformer/diffusion_pytorch_model.safetensors
    fi
    # the text encoder shards are whatever its index lists
    fetch text_encoder/model.safetensors.index.json
    fetch_shards text_encoder model.safetensors.index.json 'model-[0-9]*-of-[0-9]*\.safetensors'
    echo "download_model: done. Try:  flux -d $DIR -p \"a cat\" -o cat.png"
else
    echo "download_model: done. Try:  flux -d $DIR --transformer YOUR_TRANSFORMER --text-encoder YOUR_TEXT_ENCODER -p \"a cat\" -o cat.png"
fi
