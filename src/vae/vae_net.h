/*
 * vae_net.h — the decoder and the encoder networks (vae_net.c), run by an
 * executor (vae_exec.h) set up for one decode or encode.
 */
#ifndef FX_VAE_NET_H
#define FX_VAE_NET_H

#include "vae_exec.h"

flux_status vae_net_decode(vae_exec *ex);
flux_status vae_net_encode(vae_exec *ex);

#endif
