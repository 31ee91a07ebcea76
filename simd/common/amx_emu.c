/*
 * amx_emu.c — the plain-C tile unit (see amx_emu.h for what it checks and
 * computes). Thread-local state, like the hardware's tile registers.
 */
#include "amx_emu.h"

#include "src/base/float16.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TILES = 8, MAX_ROWS = 16, ROW_BYTES = 64 };

typedef struct tile_unit {
    fx_amx_tilecfg cfg; /* palette 0: nothing loaded */
    _Alignas(64) unsigned char data[TILES][MAX_ROWS][ROW_BYTES];
    fx_amx_emu_fault_fn on_fault;
} tile_unit;

static _Thread_local tile_unit unit;

void fx_amx_emu_on_fault(fx_amx_emu_fault_fn fn) { unit.on_fault = fn; }

static void fault(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fault(const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (unit.on_fault) unit.on_fault(msg); /* does not return */
    fprintf(stderr, "amx emulator: %s\n", msg);
    abort();
}

/* The tile t of an instruction: configured, or a fault. */
static void need_tile(const char *insn, int t) {
    if (unit.cfg.palette == 0) fault("#UD: %s without a tile configuration (palette 0)", insn);
    if (t < 0 || t >= TILES) fault("#UD: %s: no tile tmm%d", insn, t);
    if (unit.cfg.rows[t] == 0) fault("#UD: %s: tmm%d is not configured (rows 0)", insn, t);
}

void fx_amx_emu_ldtilecfg(const void *mem) {
    fx_amx_tilecfg c;
    memcpy(&c, mem, sizeof c);
    if (c.palette == 0) { /* the init state */
        fx_amx_emu_release();
        return;
    }
    if (c.palette != 1) fault("#GP: LDTILECFG palette %d (only 1 exists)", c.palette);
    if (c.start_row != 0) fault("#GP: LDTILECFG start_row %d (restarts are not modelled)", c.start_row);
    for (int i = 0; i < 14; i++)
        if (c.reserved[i]) fault("#GP: LDTILECFG reserved byte %d is %d", 2 + i, c.reserved[i]);
    for (int t = 0; t < 16; t++) {
        if (t >= TILES) {
            if (c.rows[t] || c.colsb[t]) fault("#GP: LDTILECFG configures tile %d (palette 1 has 8)", t);
            continue;
        }
        if (c.rows[t] > MAX_ROWS) fault("#GP: LDTILECFG tmm%d rows %d > %d", t, c.rows[t], MAX_ROWS);
        if (c.colsb[t] > ROW_BYTES) fault("#GP: LDTILECFG tmm%d colsb %d > %d", t, c.colsb[t], ROW_BYTES);
        if ((c.rows[t] == 0) != (c.colsb[t] == 0))
            fault("#GP: LDTILECFG tmm%d rows %d with colsb %d", t, c.rows[t], c.colsb[t]);
    }
    unit.cfg = c;
    memset(unit.data, 0, sizeof unit.data); /* a new configuration zeroes the tiles */
}

void fx_amx_emu_sttilecfg(void *mem) { memcpy(mem, &unit.cfg, sizeof unit.cfg); }

void fx_amx_emu_release(void) {
    memset(&unit.cfg, 0, sizeof unit.cfg);
    memset(unit.data, 0, sizeof unit.data);
}

void fx_amx_emu_load(int t, const void *base, int64_t stride) {
    need_tile("TILELOADD", t);
    const int rows = unit.cfg.rows[t], colsb = unit.cfg.colsb[t];
    memset(unit.data[t], 0, sizeof unit.data[t]);
    for (int r = 0; r < rows; r++) memcpy(unit.data[t][r], (const char *)base + (int64_t)r * stride, (size_t)colsb);
}

void fx_amx_emu_store(int t, void *base, int64_t stride) {
    need_tile("TILESTORED", t);
    const int rows = unit.cfg.rows[t], colsb = unit.cfg.colsb[t];
    for (int r = 0; r < rows; r++) memcpy((char *)base + (int64_t)r * stride, unit.data[t][r], (size_t)colsb);
}

void fx_amx_emu_zero(int t) {
    need_tile("TILEZERO", t);
    memset(unit.data[t], 0, sizeof unit.data[t]);
}

/* ---- TDPBF16PS ---------------------------------------------------------- */

static float bf16_at(const unsigned char *row, int i) {
    uint16_t h;
    memcpy(&h, row + 2 * i, 2);
    return fx_f32_flush_subnormal(fx_bf16_bits_to_f32(h));
}

/* The operand checks every TDP* instruction faults on (SDM: #UD). */
static void check_dp(const char *insn, int c, int a, int b) {
    need_tile(insn, c);
    need_tile(insn, a);
    need_tile(insn, b);
    if (c == a || c == b || a == b) fault("#UD: %s tmm%d, tmm%d, tmm%d: tiles must differ", insn, c, a, b);
    const fx_amx_tilecfg *g = &unit.cfg;
    if (g->colsb[c] % 4 || g->colsb[a] % 4 || g->colsb[b] % 4)
        fault("#UD: %s colsb %d, %d, %d not multiples of 4", insn, g->colsb[c], g->colsb[a], g->colsb[b]);
    if (g->colsb[a] / 4 != g->rows[b])
        fault("#UD: %s K mismatch: tmm%d has %d dwords per row, tmm%d has %d rows", insn, a, g->colsb[a] / 4, b,
              g->rows[b]);
    if (g->colsb[c] != g->colsb[b])
        fault("#UD: %s N mismatch: tmm%d colsb %d, tmm%d colsb %d", insn, c, g->colsb[c], b, g->colsb[b]);
    if (g->rows[c] != g->rows[a])
        fault("#UD: %s M mismatch: tmm%d rows %d, tmm%d rows %d", insn, c, g->rows[c], a, g->rows[a]);
}

void fx_amx_emu_dpbf16ps(int c, int a, int b) {
    check_dp("TDPBF16PS", c, a, b);
    const fx_amx_tilecfg *g = &unit.cfg;
    const int M = g->rows[c], N = g->colsb[c] / 4, K = g->colsb[a] / 4;
    float av[MAX_ROWS][32], bv[MAX_ROWS][32]; /* inputs as f32, denormals zeroed */
    for (int m = 0; m < M; m++)
        for (int e = 0; e < 2 * K; e++) av[m][e] = bf16_at(unit.data[a][m], e);
    for (int k = 0; k < K; k++)
        for (int e = 0; e < 2 * N; e++) bv[k][e] = bf16_at(unit.data[b][k], e);
    unsigned char out[MAX_ROWS][ROW_BYTES];
    memset(out, 0, sizeof out);
    for (int m = 0; m < M; m++) {
        float even[16] = {0}, odd[16] = {0};
        for (int k = 0; k < K; k++) {
            const float a0 = av[m][2 * k], a1 = av[m][2 * k + 1];
            for (int n = 0; n < N; n++) {
                even[n] = fx_f32_flush_subnormal(fx_fma_bf16(a0, bv[k][2 * n], even[n]));
                odd[n] = fx_f32_flush_subnormal(fx_fma_bf16(a1, bv[k][2 * n + 1], odd[n]));
            }
        }
        for (int n = 0; n < N; n++) {
            float cv;
            memcpy(&cv, unit.data[c][m] + 4 * n, 4);
            const float r = fx_f32_flush_subnormal(fx_f32_flush_subnormal(cv) + fx_f32_flush_subnormal(even[n] + odd[n]));
            memcpy(out[m] + 4 * n, &r, 4);
        }
    }
    memcpy(unit.data[c], out, sizeof out); /* rows past M and bytes past colsb: zero */
}

/* ---- TDPBSSD / TDPBSUD / TDPBUSD / TDPBUUD ------------------------------ */

static int32_t byte_at(const unsigned char *row, int i, int is_signed) {
    return is_signed ? (int32_t)(int8_t)row[i] : (int32_t)row[i];
}

/* SDM: per output C[m][n], for each dword k of A's row m, DPBD adds the
 * four products of the bytes of A[m].dword[k] and B[k].dword[n] (each byte
 * sign- or zero-extended by the variant) to the int32, wrapping modulo 2^32
 * (no saturating form exists); the rest of C is zeroed. */
void fx_amx_emu_dpb(int c, int a, int b, int a_signed, int b_signed) {
    static const char *const names[2][2] = {{"TDPBUUD", "TDPBUSD"}, {"TDPBSUD", "TDPBSSD"}};
    check_dp(names[a_signed != 0][b_signed != 0], c, a, b);
    const fx_amx_tilecfg *g = &unit.cfg;
    const int M = g->rows[c], N = g->colsb[c] / 4, K = g->colsb[a] / 4;
    unsigned char out[MAX_ROWS][ROW_BYTES];
    memset(out, 0, sizeof out);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            uint32_t acc;
            memcpy(&acc, unit.data[c][m] + 4 * n, 4);
            for (int k = 0; k < K; k++)
                for (int e = 0; e < 4; e++)
                    acc += (uint32_t)(byte_at(unit.data[a][m], 4 * k + e, a_signed) *
                                      byte_at(unit.data[b][k], 4 * n + e, b_signed));
            memcpy(out[m] + 4 * n, &acc, 4);
        }
    memcpy(unit.data[c], out, sizeof out);
}
