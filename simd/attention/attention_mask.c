/*
 * attention_mask.c — masking of partly visible key tiles (padding keys,
 * keys past the end, causal), shared by every per-ISA task walk; see
 * attention.h (fx_attn_tile_vis decides which tiles need it).
 */
#include "attention.h"

#include <math.h>

void fx_attn_mask_tile(const fx_attn_plan *p, const fx_attn_task *k, int64_t kb, float *s,
                       int lds) {
    const int kt = p->kt, rows = p->rows_pad;
    const int64_t j0 = kb * kt;
    /* Per row, the number of leading keys of this tile it may see (causal). */
    int first_hidden_pos[64];
    int npos = k->np;
    for (int jj = 0; jj < kt; jj++) {
        int64_t j = j0 + jj;
        float *srow = s + (size_t)jj * lds;
        if (j >= p->a.sk || (p->a.key_mask && !p->a.key_mask[j])) {
            for (int r = 0; r < rows; r++) srow[r] = -INFINITY;
        }
    }
    if (!p->a.causal) return;
    /* Row r (position p0 + r/group) sees key j iff j <= p0 + r/group + off. */
    for (int pi0 = 0; pi0 < npos; pi0 += 64) {
        int n = npos - pi0 < 64 ? npos - pi0 : 64;
        for (int i = 0; i < n; i++) {
            int64_t last = k->p0 + pi0 + i + p->a.causal_offset - j0; /* last visible jj */
            first_hidden_pos[i] = last < -1 ? 0 : last >= kt ? kt : (int)(last + 1);
        }
        for (int i = 0; i < n; i++) {
            int r0 = (pi0 + i) * p->group;
            for (int jj = first_hidden_pos[i]; jj < kt; jj++) {
                float *srow = s + (size_t)jj * lds + r0;
                for (int gi = 0; gi < p->group; gi++) srow[gi] = -INFINITY;
            }
        }
    }
}
