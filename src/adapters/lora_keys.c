/*
 * lora_keys.c — the tensor names of LoRA / LyCORIS files (lora.h): which
 * factor a key holds, which module it belongs to, and the lookup form of a
 * module name. Pure string work, no allocation (fuzzed by fuzz_lora).
 */
#include "lora.h"

#include <string.h>

typedef struct suffix_rule {
    const char *suffix;
    fx_lora_part part;
    const char *scheme; /* refused schemes only */
} suffix_rule;

/* No suffix here ends with another one, so the first match is the match. */
static const suffix_rule rules[] = {
    {".lora_A.weight", FX_LORA_A, NULL},
    {".lora_B.weight", FX_LORA_B, NULL},
    {".lora_A.default.weight", FX_LORA_A, NULL},
    {".lora_B.default.weight", FX_LORA_B, NULL},
    {".lora_down.weight", FX_LORA_A, NULL},
    {".lora_up.weight", FX_LORA_B, NULL},
    {".lora.down.weight", FX_LORA_A, NULL},
    {".lora.up.weight", FX_LORA_B, NULL},
    {"_lora.down.weight", FX_LORA_A, NULL},
    {"_lora.up.weight", FX_LORA_B, NULL},
    {".lora_linear_layer.down.weight", FX_LORA_A, NULL},
    {".lora_linear_layer.up.weight", FX_LORA_B, NULL},
    {".alpha", FX_LORA_ALPHA, NULL},
    {".lokr_w1", FX_LORA_LOKR_W1, NULL},
    {".lokr_w1_a", FX_LORA_LOKR_W1_A, NULL},
    {".lokr_w1_b", FX_LORA_LOKR_W1_B, NULL},
    {".lokr_w2", FX_LORA_LOKR_W2, NULL},
    {".lokr_w2_a", FX_LORA_LOKR_W2_A, NULL},
    {".lokr_w2_b", FX_LORA_LOKR_W2_B, NULL},
    {".hada_w1_a", FX_LORA_HADA_W1_A, NULL},
    {".hada_w1_b", FX_LORA_HADA_W1_B, NULL},
    {".hada_w2_a", FX_LORA_HADA_W2_A, NULL},
    {".hada_w2_b", FX_LORA_HADA_W2_B, NULL},
    {".diff", FX_LORA_DIFF, NULL},
    {".diff_b", FX_LORA_DIFF_B, NULL},
    {".dora_scale", FX_LORA_DORA_SCALE, NULL},
    {".magnitude", FX_LORA_MAGNITUDE, NULL},
    {".lora_magnitude_vector", FX_LORA_MAGNITUDE, NULL},
    {".lora_magnitude_vector.weight", FX_LORA_MAGNITUDE, NULL},
    {".lora_magnitude_vector.default.weight", FX_LORA_MAGNITUDE, NULL},
    {".set_weight", FX_LORA_REFUSED, "set_weight (a replaced weight)"},
    {".lokr_t1", FX_LORA_REFUSED, "LoKr with a Tucker core (convolutions)"},
    {".lokr_t2", FX_LORA_REFUSED, "LoKr with a Tucker core (convolutions)"},
    {".hada_t1", FX_LORA_REFUSED, "LoHa with a Tucker core (convolutions)"},
    {".hada_t2", FX_LORA_REFUSED, "LoHa with a Tucker core (convolutions)"},
    {".lora_mid.weight", FX_LORA_REFUSED, "LoCon with a mid factor (convolutions)"},
    {".oft_blocks", FX_LORA_REFUSED, "OFT"},
    {".oft_R", FX_LORA_REFUSED, "OFT"},
    {".oft_diag", FX_LORA_REFUSED, "OFT"},
    {".rescale", FX_LORA_REFUSED, "OFT/BOFT (rescale)"},
    {".glora_a1", FX_LORA_REFUSED, "GLoRA"},
    {".glora_a2", FX_LORA_REFUSED, "GLoRA"},
    {".glora_b1", FX_LORA_REFUSED, "GLoRA"},
    {".glora_b2", FX_LORA_REFUSED, "GLoRA"},
    {".w_norm", FX_LORA_REFUSED, "LyCORIS norm (w_norm)"},
    {".b_norm", FX_LORA_REFUSED, "LyCORIS norm (b_norm)"},
    {".lora_A.bias", FX_LORA_REFUSED, "LoRA with biases"},
    {".lora_B.bias", FX_LORA_REFUSED, "LoRA with biases"},
    {".lora_down.bias", FX_LORA_REFUSED, "LoRA with biases"},
    {".lora_up.bias", FX_LORA_REFUSED, "LoRA with biases"},
    {".on_input", FX_LORA_REFUSED, "IA3"},
};

/* Prefixes of module names (stripped in any order, repeatedly). */
static const char *const prefixes[] = {
    "base_model.model.", "model.diffusion_model.", "diffusion_model.", "transformer.", "unet.",
    "lora_unet_",        "lycoris_",               "lora_transformer_",
};

/* Modules of a text encoder (before any prefix is stripped). */
static const char *const text_encoder_prefixes[] = {"lora_te", "text_encoder", "lycoris_te", "base_model.model.text_encoder"};

static int starts_with(const char *s, size_t n, const char *p) {
    size_t k = strlen(p);
    return n >= k && !memcmp(s, p, k);
}

void fx_lora_parse_key(const char *key, fx_lora_key *out) {
    const size_t n = strlen(key);
    memset(out, 0, sizeof *out);
    out->stem_len = n;
    for (size_t i = 0; i < sizeof rules / sizeof *rules; i++) {
        size_t k = strlen(rules[i].suffix);
        if (n > k && !memcmp(key + n - k, rules[i].suffix, k)) {
            out->part = rules[i].part;
            out->scheme = rules[i].scheme;
            out->stem_len = n - k;
            break;
        }
    }
    for (size_t i = 0; i < sizeof text_encoder_prefixes / sizeof *text_encoder_prefixes; i++)
        if (starts_with(key, out->stem_len, text_encoder_prefixes[i])) out->text_encoder = 1;
}

const char *fx_lora_strip_prefixes(const char *stem, size_t *len) {
    for (int again = 1; again;) {
        again = 0;
        for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++)
            if (starts_with(stem, *len, prefixes[i]) && *len > strlen(prefixes[i])) {
                stem += strlen(prefixes[i]);
                *len -= strlen(prefixes[i]);
                again = 1;
            }
    }
    return stem;
}

size_t fx_lora_flat_name(const char *stem, size_t stem_len, char *out, size_t size) {
    stem = fx_lora_strip_prefixes(stem, &stem_len);
    for (size_t i = 0; i < stem_len && i + 1 < size; i++) out[i] = stem[i] == '.' ? '_' : stem[i];
    if (size) out[stem_len < size ? stem_len : size - 1] = '\0';
    return stem_len + 1;
}
