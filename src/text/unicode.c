/*
 * unicode.c — lenient UTF-8 decoding and NFC over the generated tables
 * (unicode_tables.c). Behaviour is documented in unicode.h.
 */
#include "unicode.h"

#include <string.h>

extern const int fx_uc_decomp_count;
extern const uint32_t fx_uc_decomp_cp[];
extern const uint16_t fx_uc_decomp_off[];
extern const uint32_t fx_uc_decomp_pool[];
extern const int fx_uc_comp_count;
extern const uint64_t fx_uc_comp_key[];
extern const uint32_t fx_uc_comp_val[];

/* ------------------------------------------------------------------ UTF-8 */

uint32_t fx_utf8_decode(const uint8_t *s, size_t n, size_t *used) {
    uint8_t b0 = s[0];
    if (b0 < 0x80) {
        *used = 1;
        return b0;
    }
    /* Lead byte → sequence length and the accepted range of the second
     * byte (Unicode Table 3-7); later bytes are always 80..BF. */
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;
    uint32_t cp;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        len = 2, cp = b0 & 0x1Fu;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        len = 3, cp = b0 & 0x0Fu;
        if (b0 == 0xE0) lo = 0xA0;      /* no overlongs */
        if (b0 == 0xED) hi = 0x9F;      /* no surrogates */
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4, cp = b0 & 0x07u;
        if (b0 == 0xF0) lo = 0x90;      /* no overlongs */
        if (b0 == 0xF4) hi = 0x8F;      /* nothing above U+10FFFF */
    } else {
        *used = 1; /* 80..C1, F5..FF can never start a sequence */
        return FX_UNICODE_REPLACEMENT;
    }
    size_t i = 1;
    for (; i < len; i++) {
        if (i >= n) break;
        uint8_t b = s[i];
        if (b < lo || b > hi) break;
        cp = (cp << 6) | (b & 0x3Fu);
        lo = 0x80, hi = 0xBF;
    }
    *used = i; /* the maximal subpart when ill-formed */
    return i == len ? cp : FX_UNICODE_REPLACEMENT;
}

size_t fx_utf8_encode(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

size_t fx_utf8_to_cps(const uint8_t *s, size_t n, uint32_t *out) {
    size_t i = 0, k = 0;
    while (i < n) {
        if (s[i] < 0x80) { /* ASCII run: the common case */
            out[k++] = s[i++];
            continue;
        }
        size_t used;
        out[k++] = fx_utf8_decode(s + i, n - i, &used);
        i += used;
    }
    return k;
}

int fx_utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t used;
        if (fx_utf8_decode(s + i, n - i, &used) == FX_UNICODE_REPLACEMENT) {
            /* a literal U+FFFD (EF BF BD) is well-formed */
            if (!(used == 3 && s[i] == 0xEF && s[i + 1] == 0xBF && s[i + 2] == 0xBD)) return 0;
        }
        i += used;
    }
    return 1;
}

/* ------------------------------------------------------------------ NFC */

enum {
    S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7,
    L_COUNT = 19, V_COUNT = 21, T_COUNT = 28,
    N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT
};

size_t fx_uc_decompose(uint32_t cp, uint32_t out[4]) {
    if (cp - S_BASE < (uint32_t)S_COUNT) {
        uint32_t s = cp - S_BASE;
        out[0] = L_BASE + s / N_COUNT;
        out[1] = V_BASE + (s % N_COUNT) / T_COUNT;
        if (s % T_COUNT == 0) return 2;
        out[2] = T_BASE + s % T_COUNT;
        return 3;
    }
    if (!(fx_uc_prop_of(cp)->flags & FX_UC_DECOMPOSES)) {
        out[0] = cp;
        return 1;
    }
    int lo = 0, hi = fx_uc_decomp_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (fx_uc_decomp_cp[mid] < cp) lo = mid + 1;
        else if (fx_uc_decomp_cp[mid] > cp) hi = mid - 1;
        else {
            size_t a = fx_uc_decomp_off[mid], b = fx_uc_decomp_off[mid + 1];
            memcpy(out, fx_uc_decomp_pool + a, (b - a) * sizeof(uint32_t));
            return b - a;
        }
    }
    out[0] = cp; /* unreachable with consistent tables */
    return 1;
}

uint32_t fx_uc_compose(uint32_t a, uint32_t b) {
    if (a - L_BASE < (uint32_t)L_COUNT && b - V_BASE < (uint32_t)V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a - S_BASE < (uint32_t)S_COUNT && (a - S_BASE) % T_COUNT == 0 && b - T_BASE - 1 < (uint32_t)(T_COUNT - 1))
        return a + (b - T_BASE);
    if (a > FX_UNICODE_MAX || b > FX_UNICODE_MAX) return 0;
    uint64_t key = ((uint64_t)a << 21) | b;
    int lo = 0, hi = fx_uc_comp_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (fx_uc_comp_key[mid] < key) lo = mid + 1;
        else if (fx_uc_comp_key[mid] > key) hi = mid - 1;
        else return fx_uc_comp_val[mid];
    }
    return 0;
}

int fx_nfc_quick_check(const uint32_t *s, size_t n) {
    unsigned last_ccc = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < 0x300) { /* below the first combining mark: inert */
            last_ccc = 0;
            continue;
        }
        const fx_uc_prop *p = fx_uc_prop_of(s[i]);
        if (p->ccc && last_ccc > p->ccc) return 0;
        if ((p->flags & FX_UC_QC_MASK) != FX_UC_QC_YES) return 0;
        last_ccc = p->ccc;
    }
    return 1;
}

/* Stable sort of a run of marks by combining class. Short runs: insertion
 * sort; long runs (adversarial input): counting sort through tmp, so the
 * whole normalisation stays linear. */
static void sort_marks(uint32_t *run, size_t n, uint32_t *tmp) {
    if (n < 2) return;
    if (n <= 32) {
        for (size_t i = 1; i < n; i++) {
            uint32_t c = run[i];
            unsigned cc = fx_uc_ccc(c);
            size_t j = i;
            while (j > 0 && (unsigned)fx_uc_ccc(run[j - 1]) > cc) {
                run[j] = run[j - 1];
                j--;
            }
            run[j] = c;
        }
        return;
    }
    size_t start[257] = {0};
    for (size_t i = 0; i < n; i++) start[fx_uc_ccc(run[i]) + 1]++;
    for (int c = 1; c <= 256; c++) start[c] += start[c - 1];
    for (size_t i = 0; i < n; i++) tmp[start[fx_uc_ccc(run[i])]++] = run[i];
    memcpy(run, tmp, n * sizeof(uint32_t));
}

size_t fx_nfc(const uint32_t *in, size_t n, uint32_t *out, uint32_t *tmp) {
    /* 1. full canonical decomposition */
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (in[i] < 0xC0) out[m++] = in[i]; /* nothing below U+00C0 decomposes */
        else m += fx_uc_decompose(in[i], out + m);
    }
    /* 2. canonical ordering: sort every maximal run of non-starters */
    for (size_t i = 0; i < m;) {
        if (out[i] < 0x300 || fx_uc_ccc(out[i]) == 0) {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < m && fx_uc_ccc(out[j]) != 0) j++;
        sort_marks(out + i, j - i, tmp);
        i = j;
    }
    /* 3. canonical composition (in place; the output only shrinks). A mark
     * combines with the last starter unless blocked by a character of
     * class 0 or of a class >= its own in between. */
    if (m == 0) return 0;
    size_t starter = 0, k = 1;
    unsigned last_cc = (unsigned)fx_uc_ccc(out[0]);
    if (last_cc != 0) last_cc = 256; /* leading mark: nothing may combine */
    for (size_t i = 1; i < m; i++) {
        uint32_t c = out[i];
        unsigned cc = (unsigned)fx_uc_ccc(c);
        /* only NFC_QC=Maybe characters are ever the second of a pair */
        uint32_t comp = 0;
        if ((last_cc < cc || last_cc == 0) && c >= 0x300 &&
            (fx_uc_prop_of(c)->flags & FX_UC_QC_MASK) == FX_UC_QC_MAYBE)
            comp = fx_uc_compose(out[starter], c);
        if (comp) {
            out[starter] = comp;
            continue;
        }
        if (cc == 0) starter = k;
        last_cc = cc;
        out[k++] = c;
    }
    return k;
}

size_t fx_nfc_spans(const uint32_t *in, size_t n, uint32_t *out, uint32_t *tmp) {
    size_t k = 0, verbatim = 0, last_boundary = 0;
    unsigned last_ccc = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = in[i];
        if (c < 0x300) {
            last_boundary = i, last_ccc = 0;
            continue;
        }
        const fx_uc_prop *p = fx_uc_prop_of(c);
        int qc_yes = (p->flags & FX_UC_QC_MASK) == FX_UC_QC_YES;
        if (p->ccc == 0 && qc_yes) last_boundary = i;
        if (qc_yes && (p->ccc == 0 || last_ccc <= p->ccc)) {
            last_ccc = p->ccc;
            continue;
        }
        /* normalise from the last boundary up to the next one */
        size_t j = i + 1;
        while (j < n && !fx_nfc_boundary_before(in[j])) j++;
        memcpy(out + k, in + verbatim, (last_boundary - verbatim) * sizeof(uint32_t));
        k += last_boundary - verbatim;
        k += fx_nfc(in + last_boundary, j - last_boundary, out + k, tmp);
        verbatim = last_boundary = j;
        last_ccc = 0;
        i = j - 1;
    }
    memcpy(out + k, in + verbatim, (n - verbatim) * sizeof(uint32_t));
    return k + n - verbatim;
}
