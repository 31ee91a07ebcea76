#!/usr/bin/env python3
"""fit_exp_poly.py — the coefficients of the vectorised expf (simd/rowops_simd.h).

exp(r) = 1 + r + r^2 * q(r) on |r| <= ln2/2, q of degree 4 (c2..c6), fitted
to minimise the maximum *relative* error of exp (weight r^2 / exp(r) on the
error of q) by Lawson's iteratively reweighted least squares on Chebyshev
points. Prints the coefficients rounded to f32 and the error measured by
evaluating the polynomial in f32 the way the kernel does (FMA-free numpy
arithmetic gives an upper bound). Needs numpy; nothing in `make test` runs it.
"""
import numpy as np

half_ln2 = np.log(2) / 2
r = np.cos(np.linspace(0, np.pi, 4001)) * half_ln2 * 1.01
r = r[np.abs(r) > 1e-9]
g = (np.expm1(r) - r) / r**2
w = r**2 / np.exp(r)
A = np.vstack([r**k for k in range(5)]).T
lawson = np.ones_like(r)
for _ in range(200):
    s = np.sqrt(lawson)
    c, *_ = np.linalg.lstsq(A * (s * w)[:, None], g * s * w, rcond=None)
    e = np.abs((A @ c - g) * w)
    lawson = lawson * e
    lawson /= lawson.sum()
print("approximation error (relative): %.3g" % e.max())
cf = c.astype(np.float32)
for k, v in enumerate(cf):
    print("#define EXP_C%d %.8gf" % (k + 2, v))
x = np.linspace(-half_ln2, half_ln2, 200001).astype(np.float32)
q = np.float32(cf[4])
for k in (3, 2, 1, 0):
    q = (q * x + cf[k]).astype(np.float32)
p = (q * (x * x) + x).astype(np.float32) + np.float32(1)
rel = np.abs(p.astype(np.float64) - np.exp(x.astype(np.float64))) / np.exp(x.astype(np.float64))
print("f32 evaluation on |r| <= ln2/2: max error %.3f ulp" % (rel.max() / 2**-23))
