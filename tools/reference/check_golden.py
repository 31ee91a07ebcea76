#!/usr/bin/env python3
"""check_golden.py — run the float64 reference on every golden case and print
max|ref − golden| / max|golden| per array.

    python3 tools/reference/check_golden.py [--golden tests/golden] [CASE ...]

Works for the official cases (tests/golden/<case>, model in tests/golden/model
or model-base) and for our own cases (tests/golden/ours-*, whose model is
regenerated from case.txt into build/golden-models/ by gen_model). Exits 1 if
any array is off by more than --tol (default 1e-5). The official cases are
compared with the official float32 σ/timestep rounding reproduced (--time).
"""
import argparse
import glob
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import klein  # noqa: E402
import cases  # noqa: E402


def rel(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf")
    d = np.abs(b).max()
    return float(np.abs(a - b).max() / d) if d > 0 else float(np.abs(a - b).max())


class Report:
    def __init__(self, tol):
        self.tol, self.worst, self.bad = tol, 0.0, []

    def cmp(self, case, name, ours, path):
        if not os.path.exists(path):
            return
        e = rel(ours, np.load(path))
        self.worst = max(self.worst, e)
        flag = "" if e <= self.tol else "   <-- FAIL"
        if flag:
            self.bad.append(f"{case}/{name}")
        print(f"  {name:58s} {e:.2e}{flag}")


def check_case(case_dir, R, model_dir):
    name = os.path.basename(case_dir)
    print(f"== {name}  (model {model_dir})")
    m = klein.Model(model_dir)
    out = os.path.join(case_dir, "out")
    if name.startswith("vae-encode") or os.path.exists(os.path.join(case_dir, "mean.npy")):
        img = klein.load_image(os.path.join(case_dir, "image.png"))
        cap = {}
        mean = klein.VAE(m).encode_mean(img, cap)
        R.cmp(name, "mean", mean, os.path.join(case_dir, "mean.npy"))
        R.cmp(name, "ref_latents", klein.bn_normalize(m, klein.patchify(mean)),
              os.path.join(case_dir, "ref_latents.npy"))
        for k, v in cap.items():
            R.cmp(name, f"internals_encode/{k}", v, os.path.join(case_dir, "internals_encode", k + ".npy"))
        return
    spec = cases.read_case_spec(case_dir)
    tokens = np.load(os.path.join(case_dir, "tokens.npy"))
    mask = np.load(os.path.join(case_dir, "attention_mask.npy"))
    noise = np.load(os.path.join(case_dir, "noise.npy")).astype(np.float64)
    want_text = os.path.isdir(os.path.join(case_dir, "internals_text"))
    cap = {}
    emb = klein.encode_text(m, tokens, mask, cap, all_layers=want_text)
    R.cmp(name, "out/emb", emb, os.path.join(out, "emb.npy"))
    for k, v in sorted(cap.items()):
        R.cmp(name, f"internals_text/{k}", v, os.path.join(case_dir, "internals_text", k + ".npy"))
    neg = None
    if os.path.exists(os.path.join(case_dir, "neg/tokens.npy")):
        neg = klein.encode_text(m, np.load(os.path.join(case_dir, "neg/tokens.npy")),
                                np.load(os.path.join(case_dir, "neg/attention_mask.npy")))
        R.cmp(name, "out/neg_emb", neg, os.path.join(out, "neg_emb.npy"))
    refs = []
    for r in range(16):
        p = os.path.join(case_dir, f"ref{r}.png")
        if not os.path.exists(p):
            break
        z = klein.encode_reference(m, klein.load_image(p))
        R.cmp(name, f"out/ref{r}_latents", z, os.path.join(out, f"ref{r}_latents.npy"))
        refs.append(z)
    _, h, w = noise.shape
    if os.path.exists(os.path.join(case_dir, "velocity_t1.npy")):
        cap = {}
        v1 = klein.transformer(m, klein.pack(noise), klein.image_ids(h, w), emb, 1.0, cap)
        R.cmp(name, "velocity_t1", v1, os.path.join(case_dir, "velocity_t1.npy"))
        for k, v in cap.items():
            R.cmp(name, f"internals_velocity_t1/{k}", v,
                  os.path.join(case_dir, "internals_velocity_t1", k + ".npy"))
    steps = len(np.load(os.path.join(out, "sigmas.npy"))) - 1
    guidance = spec.get("guidance", 4.0 if neg is not None else 1.0)
    rec = {}
    x = klein.generate(m, emb, noise, steps, refs, neg_emb=neg, guidance=float(guidance),
                       sched=spec.get("schedule", "shifted"), record=rec)
    R.cmp(name, "out/sigmas", rec["sigmas"], os.path.join(out, "sigmas.npy"))
    for k in sorted(rec):
        if k.startswith("step"):
            R.cmp(name, f"out/steps/{k}", rec[k], os.path.join(out, "steps", k + ".npy"))
    R.cmp(name, "out/latents", rec["latents"], os.path.join(out, "latents.npy"))
    R.cmp(name, "out/latents_packed", x, os.path.join(out, "latents_packed.npy"))
    cap = {}
    zin, img = klein.decode_latents(m, x, h, w, cap)
    R.cmp(name, "out/decoder_in", zin, os.path.join(out, "decoder_in.npy"))
    R.cmp(name, "out/image", img, os.path.join(out, "image.npy"))
    png = os.path.join(out, "image.png")
    if os.path.exists(png):
        from PIL import Image
        diff = np.abs(klein.to_uint8(img).astype(int) - np.asarray(Image.open(png).convert("RGB")).astype(int))
        print(f"  {'out/image.png (max |Δ| in 1/255)':58s} {diff.max()}")
    if os.path.exists(os.path.join(case_dir, "decode_decoder_in.npy")):
        dz = np.load(os.path.join(case_dir, "decode_decoder_in.npy")).astype(np.float64)
        cap = {}
        dimg = klein.VAE(m).decode(dz, cap)
        R.cmp(name, "decode", dimg, os.path.join(case_dir, "decode.npy"))
        for k, v in cap.items():
            R.cmp(name, f"internals_decode/{k}", v, os.path.join(case_dir, "internals_decode", k + ".npy"))


def check_inpaint_case(case_dir, R, golden_root):
    """An ours-img2img-* / ours-inpaint-* case (case.txt has a strength): inpaint.run_case."""
    import inpaint
    name = os.path.basename(case_dir)
    print(name)
    for rel_path, a in inpaint.run_case(case_dir, golden_root).items():
        if rel_path.endswith(".npy"):
            R.cmp(name, rel_path[:-4], a, os.path.join(case_dir, rel_path))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--golden", default=os.path.join(os.path.dirname(__file__), "../../tests/golden"))
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--time", choices=["auto", "f64", "official"], default="auto",
                    help="σ schedule / timestep angles: exact float64, or the official float32 "
                         "values (needs torch); auto = official for the official cases (they were "
                         "made by the official float32 code), f64 for ours-* (made by this reference)")
    ap.add_argument("cases", nargs="*")
    a = ap.parse_args()
    names = a.cases or sorted(os.path.basename(p) for p in glob.glob(os.path.join(a.golden, "*"))
                              if os.path.isdir(p) and not os.path.basename(p).startswith("model"))
    R = Report(a.tol)
    for n in names:
        d = os.path.join(a.golden, n)
        ours = os.path.exists(os.path.join(d, "case.txt"))
        klein.OFFICIAL_F32_TIME = a.time == "official" or (a.time == "auto" and not ours)
        if "strength" in cases.read_case_spec(d):
            check_inpaint_case(d, R, a.golden)
        else:
            check_case(d, R, cases.model_for_case(d, a.golden))
    print(f"worst relative error {R.worst:.2e}; {len(R.bad)} array(s) above {a.tol:g}")
    for b in R.bad:
        print("  FAIL", b)
    return 1 if R.bad else 0


if __name__ == "__main__":
    sys.exit(main())
