"""cases.py — golden-case descriptions (case.txt) and their models.

Each of our cases (tests/golden/ours-*) has a `case.txt` of `key: value` lines:

    # free text
    model: tiny-h3            id of the model; the C tests build it once per id
    gen_model: --preset tiny --seed 11 --heads 3 --head-dim 16 --axes 4,4,4,4
    prompt: a red fox
    size: 48x80              H x W of the output
    steps: 1
    guidance: 1.0            CFG scale (base models); 1.0 = no CFG
    refs: ref0.png ref1.png  reference images, in order
    schedule: shifted

The model folder is `gen_model -o DIR <gen_model args> --tokenizer
tests/fixtures/qwen3-tokenizer.json --link-tokenizer`; the weights depend only on
those arguments, so nothing model-sized is committed.
"""
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "../.."))


def read_case_spec(case_dir):
    spec = {}
    p = os.path.join(case_dir, "case.txt")
    if not os.path.exists(p):
        return spec
    with open(p) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            k, _, v = line.partition(":")
            spec[k.strip()] = v.strip()
    return spec


def gen_model_bin():
    env = os.environ.get("FLUX_TOOLS")
    cands = ([os.path.join(env, "gen_model")] if env else []) + [
        os.path.join(ROOT, "build/tools/tools/gen_model"),
        os.path.join(ROOT, "build/gcc/tools/gen_model"),
        os.path.join(ROOT, "build/cc/tools/gen_model")]
    for c in cands:
        if os.path.exists(c):
            return c
    raise FileNotFoundError("gen_model not built: run `make BUILD=build/tools OUT=build/tools "
                            "build/tools/tools/gen_model` (or set FLUX_TOOLS)")


def build_model(model_id, args, root=None):
    """Generate (once) the model for a case into build/golden-models/<id>."""
    root = root or os.path.join(ROOT, "build/golden-models")
    d = os.path.join(root, model_id)
    stamp = os.path.join(d, ".gen_model_args")
    if os.path.exists(stamp) and open(stamp).read() == args:
        return d
    os.makedirs(root, exist_ok=True)
    tok = os.path.join(ROOT, "tests/fixtures/qwen3-tokenizer.json")
    cmd = [gen_model_bin(), "-q", "-o", d] + args.split() + ["--tokenizer", tok, "--link-tokenizer"]
    subprocess.run(cmd, check=True)
    with open(stamp, "w") as f:
        f.write(args)
    return d


def model_for_case(case_dir, golden_root):
    spec = read_case_spec(case_dir)
    if "gen_model" in spec:
        return build_model(spec["model"], spec["gen_model"])
    if os.path.exists(os.path.join(case_dir, "neg/tokens.npy")):
        return os.path.join(golden_root, "model-base")
    return os.path.join(golden_root, "model")
