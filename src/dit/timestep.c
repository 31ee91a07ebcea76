/*
 * timestep.c — the sinusoidal timestep embedding of the transformer
 * (BFL flux2 model.py; diffusers transformer_flux2.py): diffusers Timesteps(flip_sin_to_cos=True,
 * downscale_freq_shift=0), i.e. [cos | sin], max period 10000.
 */
#include "transformer.h"

#include <math.h>

void fx_timestep_embedding(double t, int dim, float *e) {
    int half = dim / 2;
    for (int i = 0; i < half; i++) {
        double f = exp(-log(10000.0) * (double)i / (double)half);
        double a = t * f;
        e[i] = (float)cos(a);
        e[half + i] = (float)sin(a);
    }
    if (dim % 2) e[dim - 1] = 0.0f; /* odd widths are zero-padded, as diffusers */
}
