#!/usr/bin/env python3
"""gen_inpaint_golden.py — (re)generate the img2img / inpainting golden cases
tests/golden/ours-img2img-* and ours-inpaint-* with the float64 reference
(tools/reference/inpaint.py: the rules of diffusers' Flux2KleinInpaintPipeline).

    /usr/bin/python3 tools/gen_inpaint_golden.py [CASE ...]

Needs numpy and Pillow (Debian python3-numpy, python3-pil). The models are the
committed tests/golden/model (distilled) and model-base (its base twin); the
prompt embeddings are those of tests/golden/multiref-48x48-2step/out/emb.npy, so
no tokenizer is needed (the CFG case encodes the empty negative prompt from its
fixed token ids). Images, masks and noise are synthetic and deterministic.
Nothing here runs in `make test`; the C tests read what it writes.
"""
import os
import sys

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "tools/reference"))
import inpaint  # noqa: E402
import klein  # noqa: E402
import run as ref_run  # noqa: E402

GOLDEN = os.path.join(ROOT, "tests/golden")
EMB = "multiref-48x48-2step/out/emb.npy"

# name -> description. init/mask/ref: (H, W) of synthetic images.
CASES = {
    "ours-img2img-48x64-4step": dict(
        model="model", init=(52, 70), strength=0.6, steps=4, seed=201,
        note="plain img2img (no mask): init 52x70 stretched (Lanczos) to 48x64; strength 0.6 of 4 steps: "
             "t_start = int(4 - 2.4) = 1, 3 steps run"),
    "ours-inpaint-ref-48x64-4step": dict(
        model="model", init=(52, 70), mask=(30, 40), refs=[(32, 48)], strength=0.75, steps=4, seed=202,
        note="inpainting: a colour mask of 30x40 resized (Lanczos) to 48x64, gray, binarized, bilinear to "
             "3x4 tokens; one extra reference (T = 20) after the init image (T = 10); strength 0.75: "
             "t_start = 1"),
    "ours-inpaint-invert-base-cfg-32x48-3step": dict(
        model="model-base", init=(32, 48), mask=(32, 48), invert=True, strength=0.5, steps=3, seed=203,
        guidance=3.0,
        note="base model, CFG g = 3 with the empty negative prompt; mask at the output size (no resize), "
             "gray values 127/128 at the sampled pixels, inverted (A1111 inpainting_mask_invert); "
             "strength 0.5 of 3 steps: t_start = int(1.5) = 1, 2 steps"),
}


def save(path, a, dtype=np.float32):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, np.ascontiguousarray(np.asarray(a).astype(dtype)))


def synthetic_rgb(H, W, seed):
    """Smooth colour gradients and a disc: an image the VAE encodes to something non-trivial."""
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    r = 127 + 100 * np.sin(x / W * 3.1 + rng.rand() * 6)
    g = 127 + 100 * np.cos(y / H * 2.3 + rng.rand() * 6)
    b = 127 + 80 * np.sin((x + y) / (H + W) * 5.0)
    disc = (y - H * 0.4) ** 2 + (x - W * 0.6) ** 2 < (min(H, W) * 0.25) ** 2
    img = np.stack([r, g, b], -1)
    img[disc] = [230, 40, 60]
    img += rng.randn(H, W, 3) * 6
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def synthetic_mask(H, W, seed, near_threshold):
    rng = np.random.RandomState(seed)
    if near_threshold:
        # gray 127 / 128 (either side of the binarization threshold) in 16x16 blocks
        blocks = rng.randint(0, 2, (H // 16 + 1, W // 16 + 1))
        m = np.where(np.kron(blocks, np.ones((16, 16)))[:H, :W] > 0, 128, 127)
        m[:8, :] = 0
        m[-4:, :] = 255
        return np.repeat(m[:, :, None], 3, axis=2).astype(np.uint8)
    y, x = np.mgrid[0:H, 0:W]
    white = ((x - W * 0.3) ** 2 + (y - H * 0.5) ** 2 < (H * 0.35) ** 2) | (x > W * 0.8)
    m = np.zeros((H, W, 3))
    m[white] = [255, 255, 255]
    m[~white] = [20, 60, 90]
    m[(y < H * 0.2) & white] = [255, 0, 0]  # luma 76: keep, though red
    return m.astype(np.uint8)


def neg_embeddings(m):
    tokens, mask = ref_run.pad_tokens([151644, 872, 198, 151645, 198, 151644, 77091, 198,
                                       151667, 271, 151668, 271])  # "" with the chat template
    return klein.encode_text(m, tokens, mask)


def make_case(name, spec):
    from PIL import Image
    d = os.path.join(GOLDEN, name)
    o = os.path.join(d, "out")
    os.makedirs(o, exist_ok=True)
    m = klein.Model(os.path.join(GOLDEN, spec["model"]))
    emb = np.load(os.path.join(GOLDEN, EMB)).astype(np.float64)
    seed = spec["seed"]
    Image.fromarray(synthetic_rgb(*spec["init"], seed)).save(os.path.join(d, "init.png"))
    pix, (H, W) = inpaint.load_init_image(os.path.join(d, "init.png"))
    x0 = klein.encode_reference(m, pix)
    save(os.path.join(o, "ref0_latents.npy"), x0)
    refs = []
    for r, (rh, rw) in enumerate(spec.get("refs", []), start=1):
        p = os.path.join(d, f"ref{r}.png")
        Image.fromarray(synthetic_rgb(rh, rw, seed + 10 * r)).save(p)
        z = klein.encode_reference(m, klein.load_image(p))
        save(os.path.join(o, f"ref{r}_latents.npy"), z)
        refs.append(z)
    mask = None
    if "mask" in spec:
        mh, mw = spec["mask"]
        Image.fromarray(synthetic_mask(mh, mw, seed + 1, spec.get("invert", False))).save(os.path.join(d, "mask.png"))
        mask = inpaint.load_mask(os.path.join(d, "mask.png"), H, W, spec.get("invert", False))
        save(os.path.join(o, "mask.npy"), mask[None])
        assert mask.min() == 0.0 and mask.max() == 1.0, mask
    noise = np.random.RandomState(seed).standard_normal((128, H // 16, W // 16)).astype(np.float32)
    save(os.path.join(d, "noise.npy"), noise)
    guidance = spec.get("guidance", 1.0)
    neg = neg_embeddings(m) if guidance > 1.0 else None
    rec = {}
    x = inpaint.generate(m, emb, noise.astype(np.float64), spec["steps"], spec["strength"], x0, refs, mask,
                         neg_emb=neg, guidance=guidance, record=rec)
    save(os.path.join(o, "sigmas.npy"), rec["sigmas"])
    save(os.path.join(o, "start_latents.npy"), rec["start_latents"])
    for k, v in rec.items():
        if k.startswith("step"):
            save(os.path.join(o, "steps", k + ".npy"), v)
    save(os.path.join(o, "latents.npy"), rec["latents"])
    _, img = klein.decode_latents(m, x, H // 16, W // 16)
    save(os.path.join(o, "image.npy"), img)
    klein.save_png(img, os.path.join(o, "image.png"))
    lines = [f"# {name}: {spec['note']}",
             "# Generated by tools/gen_inpaint_golden.py with tools/reference/inpaint.py (float64).",
             f"model: {spec['model']}",
             f"embeddings: {EMB}",
             f"size: {H}x{W}",
             f"steps: {spec['steps']}",
             f"strength: {spec['strength']}",
             f"first_step: {rec['first_step']}",
             f"guidance: {guidance}",
             f"refs: {' '.join(f'ref{r}.png' for r in range(1, len(refs) + 1))}",
             f"mask: {'mask.png' if mask is not None else ''}",
             f"mask_invert: {1 if spec.get('invert') else 0}",
             f"noise_seed: {seed} (numpy RandomState(seed).standard_normal((128, H/16, W/16)))"]
    with open(os.path.join(d, "case.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{name}: {H}x{W}, steps {rec['first_step']}..{spec['steps'] - 1}, mask "
          f"{None if mask is None else mask.tolist()}")


def main():
    names = sys.argv[1:] or list(CASES)
    for n in names:
        make_case(n, CASES[n])


if __name__ == "__main__":
    main()
