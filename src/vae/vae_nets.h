/*
 * vae_nets.h — the decoder and the encoder networks, each with its storage
 * plan (vae_decoder.c, vae_encoder.c), run inside a prepared vs_run.
 */
#ifndef FX_VAE_NETS_H
#define FX_VAE_NETS_H

#include "vae_stream.h"

flux_status vd_decode(vs_run *r, const float *z, int h8, int w8, float *image);
flux_status ve_encode(vs_run *r, const float *image, int height, int width, float *mean);

#endif
