/*
 * amx_selftest.h — the start-up self-test of the AMX table (see
 * amx_selftest.c), run once by the dispatch before it trusts the tiles.
 */
#ifndef FX_AMX_SELFTEST_H
#define FX_AMX_SELFTEST_H

#include <stddef.h>

#include "simd/kernels.h"

/* A small exact GEMM through table k under a signal guard: 1 if right,
 * else 0 and why. */
int fx_amx_selftest(const fx_kernels *k, char *why, size_t size);

#endif
