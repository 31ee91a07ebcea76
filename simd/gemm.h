/*
 * gemm.h — per-ISA tables of the gemm kernel family (simd-internal).
 *
 * The family defines one const table per ISA it implements and publishes
 * each through a macro FX_GEMM_TABLE_<ISA> (pointer to the table) that
 * dispatch.c wires into the kernel tables; an undefined macro means "not
 * implemented for this ISA" and the scalar table is used instead.
 */
#ifndef FX_GEMM_H
#define FX_GEMM_H

#include "dispatch.h"

#endif
