/* byte_level.h — the GPT-2 byte-level alphabet, written independently of
 * src/text/tokenizer.c, for the tiny tokenizer.json vocabularies that the
 * tokenizer test and the tokenizer fuzz target build: printable bytes stand
 * for themselves, the other 68 for U+0100.. in increasing byte order. */
#ifndef FX_TEST_BYTE_LEVEL_H
#define FX_TEST_BYTE_LEVEL_H

#include <stdint.h>

static inline int fx_byte_level_printable(int b) {
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

/* The code point that stands for byte b (0..255) in the vocabulary. */
static inline uint32_t fx_byte_level_char(int b) {
    if (fx_byte_level_printable(b)) return (uint32_t)b;
    uint32_t k = 0;
    for (int x = 0; x < b; x++) k += !fx_byte_level_printable(x);
    return 256u + k;
}

#endif
