/*
 * unicode.h — the Unicode the tokenizer needs: lenient UTF-8 decoding,
 * regex character classes and NFC normalisation.
 *
 * Everything here is chosen to reproduce what the official pipeline sees:
 * the Hugging Face `tokenizers` library (Rust) behind Qwen2TokenizerFast.
 *
 * Invalid UTF-8. A prompt reaches the reference as a decoded string: Rust's
 * String::from_utf8_lossy, JavaScript's TextDecoder and Python's
 * bytes.decode(errors="replace") all replace each *maximal subpart* of an
 * ill-formed sequence (Unicode §3.9, "U+FFFD substitution of maximal
 * subparts") by one U+FFFD. fx_utf8_decode does exactly that: a byte that
 * cannot start a sequence (80-BF, C0, C1, F5-FF) is one U+FFFD; a valid lead
 * followed by too few or wrong continuation bytes is one U+FFFD covering the
 * lead and the continuation bytes that were still acceptable. Overlong forms,
 * UTF-16 surrogates (ED A0-BF ..) and values above U+10FFFF are ill-formed.
 * So "a\xC3(" becomes "a\uFFFD(" and "\xED\xA0\x80" becomes three U+FFFD.
 * U+FFFD then tokenizes like any other symbol (bytes EF BF BD).
 *
 * Regex classes. The Qwen2 pre-tokenizer regex runs on the Oniguruma engine
 * in Hugging Face `tokenizers` (verified on tokenizers 0.23 by probing every
 * code point through its pre-tokenizer):
 *   \p{L}  General_Category L* (Lu Ll Lt Lm Lo)
 *   \p{N}  General_Category N* (Nd Nl No)
 *   \s     the White_Space property: U+0009-000D, 0020, 0085, 00A0, 1680,
 *          2000-200A, 2028, 2029, 202F, 205F, 3000 — NOT U+FEFF, NOT
 *          U+180E, NOT U+200B, NOT U+001C-001F. (JavaScript's \s differs:
 *          it adds U+FEFF and drops U+0085; @lenml/tokenizers inherits that.)
 * Our tables come from Unicode 15.0 (Debian unicode-data); tokenizers 0.23
 * uses Unicode 16.0, so the ~5000 code points assigned in 15.1/16.0 are
 * OTHER here and letters/digits there. No other code point differs.
 *
 * NFC. The normaliser of Hugging Face `tokenizers` carries Unicode 9.0 data.
 * fx_nfc implements the standard algorithm (canonical decomposition,
 * canonical ordering, canonical composition with exclusions, Hangul
 * algorithmically) over the Unicode 9.0 character set: characters assigned
 * later have combining class 0 and no decomposition, as there. It equals
 * NFC of Unicode 15.0 for every string of characters assigned by 9.0.
 */
#ifndef FX_UNICODE_H
#define FX_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#define FX_UNICODE_REPLACEMENT 0xFFFDu
#define FX_UNICODE_MAX 0x10FFFFu

/* ---------------------------------------------------------------- UTF-8 */

/* Decode one code point from s[0, n) (n >= 1). Sets *used to the bytes
 * consumed (1..4) and returns the code point, or U+FFFD for an ill-formed
 * maximal subpart (see above). */
uint32_t fx_utf8_decode(const uint8_t *s, size_t n, size_t *used);

/* Encode cp (<= U+10FFFF, not a surrogate) into out; returns 1..4. */
size_t fx_utf8_encode(uint32_t cp, uint8_t out[4]);

/* Decode s[0, n) into code points (out must hold n entries: every byte
 * yields at most one). Returns the count. Never fails. */
size_t fx_utf8_to_cps(const uint8_t *s, size_t n, uint32_t *out);

/* 1 when s[0, n) is well-formed UTF-8. */
int fx_utf8_valid(const uint8_t *s, size_t n);

/* ---------------------------------------------------------------- classes */

enum fx_uc_class { FX_UC_OTHER = 0, FX_UC_LETTER = 1, FX_UC_NUMBER = 2, FX_UC_SPACE = 3 };

/* One record of the generated tables (unicode_tables.c). */
typedef struct fx_uc_prop {
    uint8_t cls;   /* enum fx_uc_class */
    uint8_t ccc;   /* canonical combining class (NFC view) */
    uint8_t flags; /* bits 0-1: NFC_QC (0 yes, 1 maybe, 2 no); bit 2: decomposes */
} fx_uc_prop;

#define FX_UC_QC_MASK 3u
#define FX_UC_QC_YES 0u
#define FX_UC_QC_MAYBE 1u
#define FX_UC_QC_NO 2u
#define FX_UC_DECOMPOSES 4u

extern const char fx_uc_tables_version[];     /* "15.0.0" */
extern const char fx_uc_tables_nfc_version[]; /* "9.0" */
extern const fx_uc_prop fx_uc_props[];
extern const uint16_t fx_uc_stage1[];
extern const uint8_t fx_uc_stage2[];

/* Properties of cp (any value; > U+10FFFF reads as unassigned). */
static inline const fx_uc_prop *fx_uc_prop_of(uint32_t cp) {
    if (cp > FX_UNICODE_MAX) cp = 0xFFFFF; /* a noncharacter: OTHER, ccc 0 */
    return &fx_uc_props[fx_uc_stage2[(size_t)fx_uc_stage1[cp >> 8] * 256 + (cp & 255)]];
}

static inline int fx_uc_class(uint32_t cp) { return fx_uc_prop_of(cp)->cls; }
static inline int fx_uc_ccc(uint32_t cp) { return fx_uc_prop_of(cp)->ccc; }

/* ---------------------------------------------------------------- NFC */

/* NFC never produces more than this many code points per input code point
 * in any intermediate step (full canonical decompositions are at most 4). */
#define FX_NFC_EXPANSION 4

/* 1 when s[0, n) is certainly already in NFC (quick check YES: no
 * decomposable-excluded or maybe-composing character, marks in canonical
 * order). 0 means "run fx_nfc". */
int fx_nfc_quick_check(const uint32_t *s, size_t n);

/* NFC of in[0, n) into out; returns the output length (<= FX_NFC_EXPANSION
 * * n). out and tmp must each hold FX_NFC_EXPANSION * n code points; tmp is
 * scratch for the canonical ordering of long runs of marks. in may not
 * overlap out or tmp. Linear time for any input. */
size_t fx_nfc(const uint32_t *in, size_t n, uint32_t *out, uint32_t *tmp);

/* A normalisation boundary lies before c when c is a starter that never
 * combines with what precedes it (ccc 0, NFC_QC yes): text on either side
 * of it normalises independently. */
static inline int fx_nfc_boundary_before(uint32_t c) {
    if (c < 0x300) return 1;
    const fx_uc_prop *p = fx_uc_prop_of(c);
    return p->ccc == 0 && (p->flags & FX_UC_QC_MASK) == FX_UC_QC_YES;
}

/* The same result as fx_nfc, faster on mostly-normalised text: only the
 * spans between normalisation boundaries that fail the quick check are
 * normalised, the rest is copied. Same buffer rules as fx_nfc. */
size_t fx_nfc_spans(const uint32_t *in, size_t n, uint32_t *out, uint32_t *tmp);

/* Full canonical decomposition of one code point into out[0, 4) (Hangul
 * algorithmically); returns the length (1 when cp does not decompose). */
size_t fx_uc_decompose(uint32_t cp, uint32_t out[4]);

/* The primary composite of (a, b), or 0 when there is none. */
uint32_t fx_uc_compose(uint32_t a, uint32_t b);

#endif
