#!/usr/bin/env python3
"""gen_inpaint_golden.py — (re)generate the img2img / inpainting golden cases
tests/golden/ours-img2img-* and ours-inpaint-* with the float64 reference
(tools/reference/inpaint.py: the rules of diffusers' Flux2KleinInpaintPipeline).

    /usr/bin/python3 tools/gen_inpaint_golden.py [CASE ...]

Needs numpy, Pillow and OpenCV (Debian python3-numpy, python3-pil, python3-opencv: the
blur case states A1111's mask blur with cv2.GaussianBlur itself). The models are the
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
    "ours-inpaint-blur-48x64-2step": dict(
        model="model", init=(48, 64), mask=(48, 64), blur=3.0, strength=1.0, steps=2, seed=204,
        note="inpainting with A1111's mask blur 3 (cv2.GaussianBlur along x then y, before the processor) "
             "and strength 1 (start = the noise; the kept area is still reset to x0 noised); blur/ holds "
             "OpenCV's blur of two masks for several sigmas"),
}

# A1111 mask blur vectors: blur/<name>.png (gray input) and blur/<name>_s<σ>.png (cv2 output).
BLUR_SIGMAS = (1.0, 2.5, 4.0, 12.0, 64.0)


def blur_vectors(d, seed):
    """Gray masks and their A1111 blur (OpenCV) for tests of our blur alone."""
    from PIL import Image
    rng = np.random.RandomState(seed)
    os.makedirs(os.path.join(d, "blur"), exist_ok=True)
    masks = {"blocks": np.kron(rng.randint(0, 2, (6, 8)), np.ones((8, 8))) * 255,
             "narrow": (rng.rand(70, 9) > 0.5) * 255}  # 9 px wide: narrower than most kernels
    for name, m in masks.items():
        m = m.astype(np.uint8)
        Image.fromarray(m).save(os.path.join(d, "blur", f"{name}.png"))
        for sg in BLUR_SIGMAS:
            Image.fromarray(inpaint.a1111_blur(m, sg, sg)).save(os.path.join(d, "blur", f"{name}_s{sg:g}.png"))


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
    if near_threshold == "blur":
        # below y = 16: a white block from x = 40, a 2-px white line at x = 22..23 (blurred away) and a
        # 1-px black line at x = 55 (blurred shut): the token taps x = 23|24 and 55|56 change with the blur
        m = np.zeros((H, W, 3), np.uint8)
        m[16:, 40:] = 255
        m[16:, 22:24] = 255
        m[16:, 55] = 0
        return m
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


def make_case(name, spec):
    """Write the case's inputs and case.txt, then its outputs from inpaint.run_case."""
    from PIL import Image
    d = os.path.join(GOLDEN, name)
    os.makedirs(os.path.join(d, "out"), exist_ok=True)
    seed = spec["seed"]
    Image.fromarray(synthetic_rgb(*spec["init"], seed)).save(os.path.join(d, "init.png"))
    H, W = spec["init"][0] // 16 * 16, spec["init"][1] // 16 * 16  # below 1024² of area: no cap
    refs = []
    for r, (rh, rw) in enumerate(spec.get("refs", []), start=1):
        Image.fromarray(synthetic_rgb(rh, rw, seed + 10 * r)).save(os.path.join(d, f"ref{r}.png"))
        refs.append(f"ref{r}.png")
    if "mask" in spec:
        mh, mw = spec["mask"]
        kind = "blur" if "blur" in spec else spec.get("invert", False)
        Image.fromarray(synthetic_mask(mh, mw, seed + 1, kind)).save(os.path.join(d, "mask.png"))
    noise = np.random.RandomState(seed).standard_normal((128, H // 16, W // 16)).astype(np.float32)
    save(os.path.join(d, "noise.npy"), noise)
    lines = [f"# {name}: {spec['note']}",
             "# Generated by tools/gen_inpaint_golden.py with tools/reference/inpaint.py (float64).",
             f"model: {spec['model']}",
             f"embeddings: {EMB}",
             f"size: {H}x{W}",
             f"steps: {spec['steps']}",
             f"strength: {spec['strength']}",
             f"guidance: {spec.get('guidance', 1.0)}",
             f"refs: {' '.join(refs)}",
             f"mask: {'mask.png' if 'mask' in spec else ''}",
             f"mask_invert: {1 if spec.get('invert') else 0}",
             f"mask_blur: {spec.get('blur', 0)}",
             f"noise_seed: {seed} (numpy RandomState(seed).standard_normal((128, H/16, W/16)))"]
    with open(os.path.join(d, "case.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    if "blur" in spec:
        blur_vectors(d, seed + 2)
    out = inpaint.run_case(d, GOLDEN)
    first = out.pop("first_step")
    for rel, a in out.items():
        save(os.path.join(d, rel), a)
    klein.save_png(out["out/image.npy"], os.path.join(d, "out/image.png"))
    mask = out.get("out/mask.npy")
    print(f"{name}: {H}x{W}, steps {first}..{spec['steps'] - 1}, mask {None if mask is None else mask[0].tolist()}")


def main():
    names = sys.argv[1:] or list(CASES)
    for n in names:
        make_case(n, CASES[n])


if __name__ == "__main__":
    main()
