/*
 * attention.h — per-ISA tables of the attention kernel family (simd-internal).
 *
 * The family defines one const table per ISA it implements and publishes
 * each through a macro FX_ATTN_TABLE_<ISA> (pointer to the table) that
 * dispatch.c wires into the kernel tables; an undefined macro means "not
 * implemented for this ISA" and the scalar table is used instead.
 */
#ifndef FX_ATTN_H
#define FX_ATTN_H

#include "dispatch.h"

#endif
