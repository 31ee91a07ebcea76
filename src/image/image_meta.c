/* image_meta.c — generation settings as image metadata (see image_meta.h). */
#include "image_meta.h"

#include "src/base/error.h"
#include "src/base/strbuf.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A1111's quote(): values with ',', ':' or '\n' become JSON strings
 * (non-ASCII kept as is, like json.dumps(ensure_ascii=False)). */
static void sb_setting_value(fx_strbuf *b, const char *v) {
    if (!strpbrk(v, ",:\n")) {
        fx_sb_str(b, v);
        return;
    }
    fx_sb_str(b, "\"");
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        switch (*p) {
        case '"': fx_sb_str(b, "\\\""); break;
        case '\\': fx_sb_str(b, "\\\\"); break;
        case '\n': fx_sb_str(b, "\\n"); break;
        case '\r': fx_sb_str(b, "\\r"); break;
        case '\t': fx_sb_str(b, "\\t"); break;
        case '\b': fx_sb_str(b, "\\b"); break;
        case '\f': fx_sb_str(b, "\\f"); break;
        default:
            if (*p < 0x20) fx_sb_printf(b, "\\u%04x", *p);
            else fx_sb_add(b, (const char *)p, 1);
        }
    }
    fx_sb_str(b, "\"");
}

static void sb_setting(fx_strbuf *b, const char *key, const char *value) {
    if (b->len && b->s[b->len - 1] != '\n') fx_sb_str(b, ", ");
    fx_sb_str(b, key);
    fx_sb_str(b, ": ");
    sb_setting_value(b, value);
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

char *fx_a1111_parameters(const char *prompt, const char *negative, int steps, uint64_t seed, int width,
                          int height, float guidance, const char *schedule, const char *model,
                          const char *version) {
    char num[64];
    fx_strbuf b = {0};
    fx_sb_str(&b, prompt ? prompt : "");
    if (negative && *negative) {
        fx_sb_str(&b, "\nNegative prompt: ");
        fx_sb_str(&b, negative);
    }
    fx_sb_str(&b, "\n");
    snprintf(num, sizeof num, "%d", steps);
    sb_setting(&b, "Steps", num);
    sb_setting(&b, "Sampler", "Euler");
    if (schedule && *schedule) sb_setting(&b, "Schedule type", schedule);
    snprintf(num, sizeof num, "%g", (double)guidance);
    sb_setting(&b, "CFG scale", num);
    snprintf(num, sizeof num, "%" PRIu64, seed);
    sb_setting(&b, "Seed", num);
    snprintf(num, sizeof num, "%dx%d", width, height);
    sb_setting(&b, "Size", num);
    if (model && *model) sb_setting(&b, "Model", model);
    sb_setting(&b, "Version", version ? version : "flux.c " FLUX_VERSION_STRING);
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    /* .strip() of the whole text, as A1111 does */
    size_t start = 0, end = b.len;
    while (start < end && is_ws(b.s[start])) start++;
    while (end > start && is_ws(b.s[end - 1])) end--;
    memmove(b.s, b.s + start, end - start);
    b.s[end - start] = '\0';
    return b.s;
}

flux_status fx_image_set_generation_text(flux_image *img, const char *prompt, const char *negative, int steps,
                                         uint64_t seed, int width, int height, float guidance,
                                         const char *schedule, const char *model, const char *version) {
    char num[64];
    const char *software = version ? version : "flux.c " FLUX_VERSION_STRING;
    flux_status s = flux_image_set_text(img, "prompt", prompt ? prompt : "");
    if (s == FLUX_OK) s = flux_image_set_text(img, "negative_prompt", negative && *negative ? negative : NULL);
    snprintf(num, sizeof num, "%" PRIu64, seed);
    if (s == FLUX_OK) s = flux_image_set_text(img, "seed", num);
    snprintf(num, sizeof num, "%d", steps);
    if (s == FLUX_OK) s = flux_image_set_text(img, "steps", num);
    snprintf(num, sizeof num, "%dx%d", width, height);
    if (s == FLUX_OK) s = flux_image_set_text(img, "size", num);
    snprintf(num, sizeof num, "%g", (double)guidance);
    if (s == FLUX_OK) s = flux_image_set_text(img, "guidance", num);
    if (s == FLUX_OK) s = flux_image_set_text(img, "schedule", schedule ? schedule : "");
    if (s == FLUX_OK) s = flux_image_set_text(img, "model", model ? model : "");
    if (s == FLUX_OK) s = flux_image_set_text(img, "Software", software);
    if (s != FLUX_OK) return s;
    char *params = fx_a1111_parameters(prompt, negative, steps, seed, width, height, guidance, schedule, model,
                                       software);
    if (!params) return FLUX_ERR_NOMEM;
    s = flux_image_set_text(img, "parameters", params);
    free(params);
    return s;
}
