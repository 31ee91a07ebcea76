/*
 * fuzz_tokenizer_gguf.c — libFuzzer target for the tokenizer of a GGUF
 * file's tokenizer.ggml.* arrays (src/text/tokenizer_gguf.c; make fuzz). The
 * input is a whole GGUF file, handed over through a memfd: loading must
 * succeed or fail cleanly with a message, and a loaded tokenizer must encode
 * a text without touching memory outside its tables.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/fuzz/fuzz_memfd.h"

#include "src/text/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[64];
    int fd = fuzz_memfd(data, size, path);
    if (fd < 0) return 0;
    fx_err err = {0};
    fx_tokenizer *tok = NULL;
    if (fx_tokenizer_load_gguf(path, &tok, &err) != FLUX_OK) {
        if (err.code == FLUX_OK || !err.msg[0]) abort();
    } else {
        static const char text[] = "Hello <|im_start|> w\xc3\xb6rld 123 \"x\"";
        fx_ids ids = {0};
        if (fx_tokenizer_encode(tok, text, sizeof text - 1, &ids, &err) != FLUX_OK && err.code != FLUX_ERR_NOMEM) abort();
        fx_ids_free(&ids);
        fx_tokenizer_free(tok);
    }
    close(fd);
    return 0;
}
