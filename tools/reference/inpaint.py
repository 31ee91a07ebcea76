"""inpaint.py — img2img and inpainting as diffusers' Flux2KleinInpaintPipeline
(src/diffusers/pipelines/flux2/pipeline_flux2_klein_inpaint.py), stated again in
float64 NumPy on top of klein.py, with Pillow for the image operations the
pipeline does with Pillow. Written from the diffusers source, not from our C.

The rules, each with where it comes from:

  init image   __call__ "2. Preprocess image": area above 1024² → PIL resize
               (LANCZOS) to (int(h·s), int(w·s)), s = sqrt(1024²/(h·w)); size
               floored to multiples of 16 (vae_scale_factor·2) = the output size;
               image_processor.preprocess(resize_mode="default") = PIL
               LANCZOS resize to it, convert("RGB"), /255 (float32), 2x − 1.
  x0           prepare_latents → _encode_vae_image: retrieve_latents(...,
               sample_mode="argmax") = the posterior mean, patchify, BN normalise
               ((z − running_mean) / sqrt(running_var + eps)), pack.
  references   ref_images = [image_latents_encoded (x0 itself), image_reference...]
               → prepare_image_latents / _prepare_image_ids: T = 10, 20, ...
  timesteps    sigmas = linspace(1, 1/N, N), μ = compute_empirical_mu(h·w, N),
               then get_timesteps(N, strength): init = min(N·strength, N),
               t_start = int(max(N − init, 0)); steps t_start..N−1 run; N − t_start
               < 1 is a ValueError.
  start        scale_noise(x0, timesteps[t_start], noise) with the begin index:
               σ_{t_start}·noise + (1 − σ_{t_start})·x0.
  mask         mask_processor.preprocess (do_convert_grayscale, do_binarize,
               no normalize): PIL LANCZOS resize to (W, H) in the mask's mode,
               convert("L"), /255 float32, < 0.5 → 0, ≥ 0.5 → 1;
               prepare_mask_latents: F.interpolate(size=(H/16, W/16),
               mode="bilinear") (align_corners False), packed to [h·w, 1].
  blend        after scheduler.step at loop index i: init_latents_proper =
               scale_noise(x0, timesteps[i+1], noise) (σ at the scheduler's step
               index i+1) unless i is the last; latents = (1 − m)·proper + m·latents.
  no mask      the same with an all-ones mask (the blend changes nothing).
  invert, blur (AUTOMATIC1111, not diffusers: modules/processing.py,
               StableDiffusionProcessingImg2Img.init): the mask converted to "L",
               ImageOps.invert, then cv2.GaussianBlur(m, (2·int(2.5σx + 0.5) + 1, 1), σx)
               and cv2.GaussianBlur(m, (1, 2·int(2.5σy + 0.5) + 1), σy), before the
               processor (A1111's own binarization before these is not applied).
  CFG          v = v_u + g·(v_c − v_u) as klein.generate (the base model).
"""
import math

import numpy as np

import klein

MAX_AREA = 1024 * 1024
UNIT = 16


def load_init_image(path):
    """→ ([3, H, W] float64 of the float32 pixels in [−1, 1], (H, W))."""
    from PIL import Image
    im = Image.open(path)
    raw_w, raw_h = im.size
    if raw_h * raw_w > MAX_AREA:
        s = math.sqrt(MAX_AREA / (raw_h * raw_w))
        im = im.resize((int(raw_w * s), int(raw_h * s)), resample=Image.LANCZOS)
        raw_w, raw_h = im.size
    W, H = raw_w // UNIT * UNIT, raw_h // UNIT * UNIT
    im = im.resize((W, H), resample=Image.LANCZOS).convert("RGB")
    a = np.asarray(im).astype(np.float32) / np.float32(255.0)
    a = np.float32(2.0) * a - np.float32(1.0)
    return a.transpose(2, 0, 1).astype(np.float64), (H, W)


def bilinear_torch(x, out_h, out_w):
    """torch.nn.functional.interpolate(mode="bilinear", align_corners=False) of x [H, W]."""
    H, W = x.shape

    def taps(n_out, n_in):
        scale = n_in / n_out
        src = np.maximum((np.arange(n_out) + 0.5) * scale - 0.5, 0.0)
        i0 = np.floor(src).astype(int)
        i1 = np.minimum(i0 + 1, n_in - 1)
        return i0, i1, src - i0

    y0, y1, wy = taps(out_h, H)
    x0, x1, wx = taps(out_w, W)
    top = x[y0][:, x0] * (1 - wx) + x[y0][:, x1] * wx
    bot = x[y1][:, x0] * (1 - wx) + x[y1][:, x1] * wx
    return top * (1 - wy)[:, None] + bot * wy[:, None]


def a1111_blur(gray, sigma_x, sigma_y):
    """A1111's mask blur of an "L" mask (uint8 [H, W]) with OpenCV."""
    import cv2
    if sigma_x > 0:
        gray = cv2.GaussianBlur(gray, (2 * int(2.5 * sigma_x + 0.5) + 1, 1), sigma_x)
    if sigma_y > 0:
        gray = cv2.GaussianBlur(gray, (1, 2 * int(2.5 * sigma_y + 0.5) + 1), sigma_y)
    return gray


def load_mask(path, H, W, invert=False, blur=0.0):
    """→ the mask on the token grid [H/16, W/16] (1 = repaint)."""
    from PIL import Image, ImageOps
    im = Image.open(path)
    if invert or blur:
        im = im.convert("L")
    if invert:
        im = ImageOps.invert(im)
    if blur:
        im = Image.fromarray(a1111_blur(np.asarray(im), blur, blur))
    im = im.resize((W, H), resample=Image.LANCZOS).convert("L")
    a = np.asarray(im).astype(np.float32) / np.float32(255.0)
    a = np.where(a >= 0.5, 1.0, 0.0)
    return bilinear_torch(a, H // UNIT, W // UNIT)


def first_step(steps, strength):
    """get_timesteps: the index of the first step that runs."""
    init_timestep = min(steps * strength, steps)
    return int(max(steps - init_timestep, 0))


def generate(m, emb, noise, steps, strength, x0, refs=(), mask=None, neg_emb=None, guidance=1.0, record=None):
    """noise [128, h, w]; x0 [128, h, w] (BN-normalised, the init image's latents);
    refs: further reference latents; mask [h, w] or None. Returns packed tokens [N, 128]."""
    rec = record if record is not None else {}
    _, h, w = noise.shape
    N = h * w
    t0 = first_step(steps, strength)
    if steps - t0 < 1:
        raise ValueError(f"strength {strength} with {steps} steps leaves no step")
    sig = klein.schedule(steps, N)  # μ from the full step count, before get_timesteps
    rec["sigmas"] = sig
    rec["first_step"] = t0
    n = klein.pack(noise)
    x0p = klein.pack(x0)
    mp = np.ones((N, 1)) if mask is None else mask.reshape(N, 1)
    x = sig[t0] * n + (1.0 - sig[t0]) * x0p
    rec["start_latents"] = klein.unpack(x, h, w)
    conds = [x0] + list(refs)
    ids = [klein.image_ids(h, w)] + [klein.image_ids(z.shape[1], z.shape[2], t=10 * (r + 1))
                                    for r, z in enumerate(conds)]
    ids = np.concatenate(ids)
    cond_tokens = [klein.pack(z) for z in conds]
    use_cfg = neg_emb is not None and guidance > 1.0
    for i in range(t0, steps):
        rec[f"step{i:02d}_in"] = x.copy()
        xin = np.concatenate([x] + cond_tokens)
        v_c = klein.transformer(m, xin, ids, emb, sig[i])[:N]
        if use_cfg:
            v_u = klein.transformer(m, xin, ids, neg_emb, sig[i])[:N]
            v = v_u + guidance * (v_c - v_u)
        else:
            v = v_c
        rec[f"step{i:02d}_v"] = v
        x = x + (sig[i + 1] - sig[i]) * v
        proper = sig[i + 1] * n + (1.0 - sig[i + 1]) * x0p if i + 1 < steps else x0p
        x = (1.0 - mp) * proper + mp * x
    rec["latents"] = klein.unpack(x, h, w)
    return x


# Empty prompt with the chat template (the base model's CFG negative).
EMPTY_PROMPT_IDS = [151644, 872, 198, 151645, 198, 151644, 77091, 198, 151667, 271, 151668, 271]


def run_case(case_dir, golden_root):
    """Compute an ours-img2img-* / ours-inpaint-* case from its inputs (case.txt, init.png,
    mask.png, refK.png, noise.npy). Returns {golden-relative path: array}."""
    import os
    import cases
    import run as ref_run
    spec = cases.read_case_spec(case_dir)
    m = klein.Model(os.path.join(golden_root, spec["model"]))
    emb = np.load(os.path.join(golden_root, spec["embeddings"])).astype(np.float64)
    pix, (H, W) = load_init_image(os.path.join(case_dir, "init.png"))
    out = {}
    x0 = klein.encode_reference(m, pix)
    out["out/ref0_latents.npy"] = x0
    refs = []
    for r, name in enumerate(spec.get("refs", "").split(), start=1):
        z = klein.encode_reference(m, klein.load_image(os.path.join(case_dir, name)))
        out[f"out/ref{r}_latents.npy"] = z
        refs.append(z)
    mask = None
    if spec.get("mask"):
        mask = load_mask(os.path.join(case_dir, spec["mask"]), H, W, spec.get("mask_invert", "0") == "1",
                         float(spec.get("mask_blur", "0")))
        out["out/mask.npy"] = mask[None]
    noise = np.load(os.path.join(case_dir, "noise.npy")).astype(np.float64)
    guidance = float(spec.get("guidance", "1.0"))
    neg = None
    if guidance > 1.0:
        tokens, amask = ref_run.pad_tokens(EMPTY_PROMPT_IDS)
        neg = klein.encode_text(m, tokens, amask)
    rec = {}
    x = generate(m, emb, noise, int(spec["steps"]), float(spec["strength"]), x0, refs, mask, neg_emb=neg,
                 guidance=guidance, record=rec)
    out["out/sigmas.npy"] = rec["sigmas"]
    out["out/start_latents.npy"] = rec["start_latents"]
    for k, v in rec.items():
        if k.startswith("step"):
            out[f"out/steps/{k}.npy"] = v
    out["out/latents.npy"] = rec["latents"]
    _, img = klein.decode_latents(m, x, H // UNIT, W // UNIT)
    out["out/image.npy"] = img
    out["first_step"] = rec["first_step"]
    return out
