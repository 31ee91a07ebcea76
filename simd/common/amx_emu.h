/*
 * amx_emu.h — a plain-C model of the AMX tile unit (AMX-TILE, -BF16, -INT8),
 * with the checks the hardware faults on.
 *
 * The AMX kernels are written once against the FX_TILE_* macros of
 * simd/common/amx.h. In the emulation build (FX_X86_EMULATED) those call
 * this model, so the kernels' packing, blocking, edge and configuration
 * logic runs on every machine; a native build uses it as the reference of
 * the start-up self-test on real AMX hardware.
 *
 * State is per thread, like the hardware's: 8 tiles of 16 rows × 64 bytes
 * and the loaded configuration (palette 0 = none). What the model checks
 * (each a fault: by default a message on stderr and abort()):
 *   LDTILECFG   palette 0 or 1; reserved bytes 0; start_row 0; per tile
 *               rows <= 16, colsb <= 64, both 0 or both non-zero; tiles
 *               8..15 unset
 *   any other   a configuration is loaded; the tile is configured
 *   TDPBF16PS,  three distinct tiles; colsb multiples of 4; a.colsb / 4
 *   TDPB??D     == b.rows, c.colsb == b.colsb, c.rows == a.rows
 * Semantics (Intel SDM): loads write colsb bytes per row and zero the rest
 * of the row and every row past `rows`; TDPBF16PS keeps, per output
 * element, two f32 partial sums (even and odd element of each bf16 pair),
 * each an FMA with DAZ, FTZ and round to nearest even, adds them and then
 * adds the sum to C, and zeroes what lies past the shape of C; the int8
 * dots (AMX-INT8) add the four byte products of each dword pair to the
 * int32 of C, wrapping, and zero past the shape of C likewise.
 */
#ifndef FX_AMX_EMU_H
#define FX_AMX_EMU_H

#include <float.h>
#include <math.h>
#include <stdint.h>

/* The 64-byte operand of LDTILECFG / STTILECFG (palette 1 layout):
 * colsb[i] and rows[i] for i >= 8 are reserved and must be 0. */
typedef struct fx_amx_tilecfg {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} fx_amx_tilecfg;

void fx_amx_emu_ldtilecfg(const void *cfg);
void fx_amx_emu_sttilecfg(void *cfg);
void fx_amx_emu_release(void);
/* Row r of tile t from / to base + r·stride (stride in bytes). */
void fx_amx_emu_load(int t, const void *base, int64_t stride);
void fx_amx_emu_store(int t, void *base, int64_t stride);
void fx_amx_emu_zero(int t);
/* C (tile c) += A (tile a) · B (tile b), bf16 pairs → f32. */
void fx_amx_emu_dpbf16ps(int c, int a, int b);
/* C (tile c) += A (tile a) · B (tile b), quads of bytes → int32 (modulo
 * 2^32); a_signed / b_signed: the bytes are s8, else u8 (TDPBSSD = 1, 1;
 * TDPBSUD = 1, 0; TDPBUSD = 0, 1; TDPBUUD = 0, 0). */
void fx_amx_emu_dpb(int c, int a, int b, int a_signed, int b_signed);

/* What happens on a fault, for this thread: NULL (default) prints the
 * message and aborts; a handler must not return (tests longjmp out). */
typedef void (*fx_amx_emu_fault_fn)(const char *msg);
void fx_amx_emu_on_fault(fx_amx_emu_fault_fn fn);

/* acc + x·y with one rounding (an f32 FMA) for bf16 values x, y (8
 * significant bits): their product is exact in f32 unless it falls below
 * the normal range, and only then is fmaf needed. The model of one step of
 * vdpbf16ps and tdpbf16ps (before the flush of the result). */
static inline float fx_fma_bf16(float x, float y, float acc) {
    const float p = x * y;
    return fabsf(p) >= FLT_MIN || x == 0.0f || y == 0.0f ? acc + p : fmaf(x, y, acc);
}

#endif
