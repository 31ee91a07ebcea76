#!/usr/bin/env python3
"""gen_server_fixtures.py — the img2img and inpainting inputs of
tests/run_server.sh, written by Pillow (not by our C):

    /usr/bin/python3 tools/gen_server_fixtures.py [OUT_DIR]   (default tests/server)

  init-100x75.png        an RGB init image of another size than the request's
  init-100x75-64x64.png  Pillow's Image.resize((64, 64), Image.LANCZOS) of it:
                         what AUTOMATIC1111's "just resize" (resize_mode 0,
                         modules/images.py resize_image) makes of it for
                         width = height = 64
  mask-64.png            a gray ("L") 64x64 mask: white (255) repaints a
                         32x32 square at (8, 16), black keeps
  mask-64-alpha.png      the same area as OpenAI marks it: RGBA, alpha 0
                         there (edit), 255 elsewhere
  mask-48-alpha.png      an RGBA mask of another size (48x48)
Needs numpy and Pillow (checked with Pillow 9.4).
"""
import os
import sys

import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "server")
os.makedirs(out, exist_ok=True)

y, x = np.mgrid[0:75, 0:100]
rgb = np.stack([(x * 255 // 99), (y * 255 // 74), ((x * 7 + y * 13) % 256)], axis=-1).astype(np.uint8)
init = Image.fromarray(rgb, "RGB")
init.save(os.path.join(out, "init-100x75.png"))
init.resize((64, 64), Image.LANCZOS).save(os.path.join(out, "init-100x75-64x64.png"))

m = np.zeros((64, 64), np.uint8)
m[16:48, 8:40] = 255
Image.fromarray(m, "L").save(os.path.join(out, "mask-64.png"))
a = np.full((64, 64, 4), 255, np.uint8)
a[16:48, 8:40, 3] = 0
Image.fromarray(a, "RGBA").save(os.path.join(out, "mask-64-alpha.png"))
b = np.full((48, 48, 4), 255, np.uint8)
b[8:24, 8:24, 3] = 0
Image.fromarray(b, "RGBA").save(os.path.join(out, "mask-48-alpha.png"))
