/*
 * amx.h — the tile instructions for the AMX kernels (*_amx.c), as macros
 * over either the real instructions or the plain-C model (amx_emu.h):
 *
 *   FX_TILE_CONFIG(cfg)       LDTILECFG (cfg: fx_amx_tilecfg, static const)
 *   FX_TILE_RELEASE()         TILERELEASE
 *   FX_TILE_LOAD(t, p, s)     TILELOADD   tmm<t> ← rows at p, s bytes apart
 *   FX_TILE_STORE(t, p, s)    TILESTORED
 *   FX_TILE_ZERO(t)           TILEZERO
 *   FX_TDPBF16PS(c, a, b)     TDPBF16PS   tmm<c> += tmm<a> · tmm<b>
 *   FX_TDPBSSD(c, a, b)       TDPBSSD     tmm<c> += tmm<a> · tmm<b>, s8 · s8
 *                             (also _BSUD, _BUSD, _BUUD: s8·u8, u8·s8, u8·u8)
 *
 * Tile numbers must be integer literals (or macros expanding to them): the
 * real instructions paste them into the mnemonic. Every thread issues
 * FX_TILE_CONFIG before its first tile instruction and FX_TILE_RELEASE
 * when its share of a kernel call is done (live tile state makes every
 * context switch save 8 KiB more), so no state survives between calls.
 *
 * The real intrinsics (GCC >= 11 / clang >= 12, files built with -mamx-tile
 * -mamx-bf16 -mamx-int8) are inline asm that does not tell the compiler which memory
 * a tile load reads or which bytes LDTILECFG reads; FX_TILE_FENCE makes
 * every C store before them complete first.
 */
#ifndef FX_AMX_H
#define FX_AMX_H

#include "simd/common/amx_emu.h"

/* The one palette every kernel uses: 8 tiles of 16 rows × 64 bytes
 * (C: 16×16 f32; A: 16 rows × 32 bf16; B: 16 pair rows × 16 columns). */
#define FX_AMX_PALETTE_16X64                                                                     \
    {.palette = 1,                                                                               \
     .colsb = {64, 64, 64, 64, 64, 64, 64, 64},                                                  \
     .rows = {16, 16, 16, 16, 16, 16, 16, 16}}

/* The tile registers of the 2×2 blocking every AMX kernel uses: C row
 * block r, column block c in tmm(2r + c); A row blocks in tmm4, 5; B
 * column blocks in tmm6, 7. */
#define FX_TMM_C00 0
#define FX_TMM_C01 1
#define FX_TMM_C10 2
#define FX_TMM_C11 3
#define FX_TMM_A0 4
#define FX_TMM_A1 5
#define FX_TMM_B0 6
#define FX_TMM_B1 7

#if defined(FX_X86_EMULATED)

#define FX_TILE_CONFIG(cfg) fx_amx_emu_ldtilecfg(cfg)
#define FX_TILE_RELEASE() fx_amx_emu_release()
#define FX_TILE_LOAD(t, p, s) fx_amx_emu_load(t, p, s)
#define FX_TILE_STORE(t, p, s) fx_amx_emu_store(t, p, s)
#define FX_TILE_ZERO(t) fx_amx_emu_zero(t)
#define FX_TDPBF16PS(c, a, b) fx_amx_emu_dpbf16ps(c, a, b)
#define FX_TDPBSSD(c, a, b) fx_amx_emu_dpb(c, a, b, 1, 1)
#define FX_TDPBSUD(c, a, b) fx_amx_emu_dpb(c, a, b, 1, 0)
#define FX_TDPBUSD(c, a, b) fx_amx_emu_dpb(c, a, b, 0, 1)
#define FX_TDPBUUD(c, a, b) fx_amx_emu_dpb(c, a, b, 0, 0)

#elif (defined(__AMX_TILE__) || defined(__AMXTILE__)) && (defined(__AMX_BF16__) || defined(__AMXBF16__))
/* GCC defines __AMX_TILE__ / __AMX_BF16__, clang __AMXTILE__ / __AMXBF16__ */

#include "simd/common/x86.h"

#define FX_TILE_FENCE() __asm__ __volatile__("" ::: "memory")
#define FX_TILE_CONFIG(cfg)                                                                      \
    do {                                                                                         \
        FX_TILE_FENCE();                                                                         \
        _tile_loadconfig(cfg);                                                                   \
    } while (0)
#define FX_TILE_RELEASE() _tile_release()
#define FX_TILE_LOAD(t, p, s)                                                                    \
    do {                                                                                         \
        FX_TILE_FENCE();                                                                         \
        _tile_loadd(t, p, s);                                                                    \
    } while (0)
#define FX_TILE_STORE(t, p, s)                                                                   \
    do {                                                                                         \
        _tile_stored(t, p, s);                                                                   \
        FX_TILE_FENCE();                                                                         \
    } while (0)
#define FX_TILE_ZERO(t) _tile_zero(t)
#define FX_TDPBF16PS(c, a, b) _tile_dpbf16ps(c, a, b)
#if defined(__AMX_INT8__) || defined(__AMXINT8__)
#define FX_TDPBSSD(c, a, b) _tile_dpbssd(c, a, b)
#define FX_TDPBSUD(c, a, b) _tile_dpbsud(c, a, b)
#define FX_TDPBUSD(c, a, b) _tile_dpbusd(c, a, b)
#define FX_TDPBUUD(c, a, b) _tile_dpbuud(c, a, b)
#endif

#else
#error "simd/common/amx.h is for *_amx.c files (built with -mamx-tile -mamx-bf16 -mamx-int8) or the X86EMU build"
#endif

/* The 2×2 blocking's steps; two_m / two_n: the second row / column block
 * is live (edge tiles skip the other).
 *   FX_TILES_2X2_ZERO   C blocks = 0
 *   FX_TILES_2X2_DP     A rows 0-15 from a0, 16-31 from a1 (as bytes per
 *                       row), B columns 0-15 from b0, 16-31 from b1 (bs
 *                       bytes per row), then C += A·B by TDP (a
 *                       FX_TDP* macro) on the live blocks
 *   FX_TILES_2X2_STORE  C blocks to c [32][ld] (4-byte elements) */
#define FX_TILES_2X2_ZERO(two_m, two_n)                                                          \
    do {                                                                                         \
        FX_TILE_ZERO(FX_TMM_C00);                                                                \
        if (two_n) FX_TILE_ZERO(FX_TMM_C01);                                                     \
        if (two_m) FX_TILE_ZERO(FX_TMM_C10);                                                     \
        if ((two_m) && (two_n)) FX_TILE_ZERO(FX_TMM_C11);                                        \
    } while (0)
#define FX_TILES_2X2_DP(TDP, two_m, two_n, a0, a1, as, b0, b1, bs)                               \
    do {                                                                                         \
        FX_TILE_LOAD(FX_TMM_A0, a0, as);                                                         \
        if (two_m) FX_TILE_LOAD(FX_TMM_A1, a1, as);                                              \
        FX_TILE_LOAD(FX_TMM_B0, b0, bs);                                                         \
        if (two_n) FX_TILE_LOAD(FX_TMM_B1, b1, bs);                                              \
        TDP(FX_TMM_C00, FX_TMM_A0, FX_TMM_B0);                                                   \
        if (two_n) TDP(FX_TMM_C01, FX_TMM_A0, FX_TMM_B1);                                        \
        if (two_m) TDP(FX_TMM_C10, FX_TMM_A1, FX_TMM_B0);                                        \
        if ((two_m) && (two_n)) TDP(FX_TMM_C11, FX_TMM_A1, FX_TMM_B1);                           \
    } while (0)
#define FX_TILES_2X2_STORE(two_m, two_n, c, ld)                                                  \
    do {                                                                                         \
        FX_TILE_STORE(FX_TMM_C00, (c), (ld) * 4);                                                \
        if (two_n) FX_TILE_STORE(FX_TMM_C01, (c) + 16, (ld) * 4);                                \
        if (two_m) FX_TILE_STORE(FX_TMM_C10, (c) + 16 * (ld), (ld) * 4);                         \
        if ((two_m) && (two_n)) FX_TILE_STORE(FX_TMM_C11, (c) + 16 * (ld) + 16, (ld) * 4);       \
    } while (0)

/* A kernel thread's first and last tile steps: load the palette, release. */
static const _Alignas(64) fx_amx_tilecfg fx_amx_palette = FX_AMX_PALETTE_16X64;
static inline void fx_amx_tiles_begin(void) { FX_TILE_CONFIG(&fx_amx_palette); }
static inline void fx_amx_tiles_end(void) { FX_TILE_RELEASE(); }

#endif
