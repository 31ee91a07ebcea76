/*
 * fuzz_repl.c — libFuzzer target for the interactive-mode line parser
 * (src/cli/cli_repl_parse.c, compiled in; make fuzz). Any bytes are one line:
 * the parser must return 0 or -1 with a message, and what it accepts must
 * be consistent (sizes in range and multiples of 16, at most 16 handles, a
 * non-empty prompt inside the line, a known command).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "src/cli/cli_repl_parse.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond) {
    if (!cond) abort();
}

static int size_ok(int w, int h) {
    return w >= CLI_MIN_SIZE && w <= CLI_MAX_SIZE && h >= CLI_MIN_SIZE && h <= CLI_MAX_SIZE && w % 16 == 0 &&
           h % 16 == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 8192) return 0;
    char *line = malloc(size + 1);
    if (!line) return 0;
    memcpy(line, data, size);
    line[size] = '\0';
    cli_repl_cmd c;
    char err[512];
    int rc = cli_repl_parse(line, &c, err, sizeof err);
    check(rc == 0 || rc == -1);
    if (rc) {
        check(err[0] != '\0' && strlen(err) < sizeof err);
    } else if (c.kind == REPL_GENERATE) {
        check(c.prompt && *c.prompt && c.prompt >= line && c.prompt < line + size + 1);
        check(c.n_refs >= 0 && c.n_refs <= FLUX_MAX_REFS);
        for (int i = 0; i < c.n_refs; i++) check(c.refs[i] >= CLI_REPL_LAST);
        check((c.width == 0 && c.height == 0) || size_ok(c.width, c.height));
    } else if (c.kind == REPL_SIZE) {
        check((c.width == 0 && c.height == 0) || size_ok(c.width, c.height));
    } else if (c.kind == REPL_STEPS) {
        check(c.random || (c.steps >= 1 && c.steps <= CLI_MAX_STEPS));
    } else if (c.kind == REPL_BATCH) {
        check(c.batch >= 1 && c.batch <= CLI_MAX_BATCH);
    } else if (c.kind == REPL_SAVE) {
        check(c.file && *c.file && (c.handle >= 0 || c.handle == CLI_REPL_LAST));
    } else if (c.kind == REPL_SEED) {
        check(c.random || c.seed != UINT64_MAX);
    } else if (c.kind == REPL_LORA) {
        check(c.file && *c.file && c.file >= line && c.file < line + size + 1 && c.scale == c.scale &&
              c.scale >= -100 && c.scale <= 100);
    } else {
        check(c.kind >= REPL_EMPTY && c.kind <= REPL_LORAS);
    }
    free(line);
    return 0;
}
