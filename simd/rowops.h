/*
 * rowops.h — per-ISA tables of the rowops kernel family (simd-internal).
 *
 * The family defines one const table per ISA it implements and publishes
 * each through a macro FX_ROW_TABLE_<ISA> (pointer to the table) that
 * dispatch.c wires into the kernel tables; an undefined macro means "not
 * implemented for this ISA" and the scalar table is used instead.
 */
#ifndef FX_ROW_H
#define FX_ROW_H

#include "dispatch.h"

#endif
