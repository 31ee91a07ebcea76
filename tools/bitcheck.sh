#!/bin/sh
# bitcheck.sh — fingerprints of the CLI's outputs, to show a restructuring
# changed nothing: for every kernel level this CPU runs (--isa) and every
# precision, one fixed-seed text-to-image and one image-reference job on a
# model, hashing the PNG and every --dump .npy stage. Run it on two builds and
# compare the lists:
#
#   tools/bitcheck.sh ./flux tests/golden/model > before.txt   (old build)
#   tools/bitcheck.sh ./flux tests/golden/model > after.txt    (new build)
#   diff before.txt after.txt && echo bit-identical
#
# The quantized paths run through --quant (q8_0 and q4_k, each as int8 and
# weight-only). With BITCHECK_BACKENDS="cpu vulkan" the Vulkan backend is
# included.
set -eu
flux=${1:?usage: tools/bitcheck.sh FLUX_BINARY MODEL_DIR}
model=${2:?usage: tools/bitcheck.sh FLUX_BINARY MODEL_DIR}
backends=${BITCHECK_BACKENDS:-cpu}
failed=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# the levels this CPU can run, from the binary's own dispatch report
isas="scalar"
for isa in avx2 avx512 avx512bf16 amx neon; do
    if "$flux" --isa "$isa" --version >/dev/null 2>&1 &&
        "$flux" -d "$model" --isa "$isa" -W 64 -H 64 -s 1 -S 1 -p x -o "$work/probe.png" >/dev/null 2>&1; then
        isas="$isas $isa"
    fi
done

run() { # label, then flux arguments
    label=$1
    shift
    rm -rf "$work/out" && mkdir "$work/out"
    if ! "$flux" -d "$model" -S 42 -W 80 -H 64 -s 2 -p "a red fox in the snow" \
        -o "$work/out/image.png" --dump "$work/out/dump" "$@" >"$work/log" 2>&1; then
        echo "$label: FAILED ($(tail -1 "$work/log"))"
        failed=1
        return
    fi
    (cd "$work/out" && find . -type f | LC_ALL=C sort | xargs sha256sum) | sed "s|^|$label |"
}

for backend in $backends; do
    for isa in $isas; do
        for precision in default f32; do
            run "$backend/$isa/$precision" --backend "$backend" --isa "$isa" --precision "$precision"
        done
        run "$backend/$isa/ref" --backend "$backend" --isa "$isa" -i "$work/probe.png"
        for quant in q8_0 q4_k; do
            for precision in default bf16; do
                run "$backend/$isa/$quant-$precision" --backend "$backend" --isa "$isa" --precision "$precision" \
                    --quant "$quant"
            done
        done
    done
done
exit $failed
