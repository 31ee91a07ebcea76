/*
 * tokenizer.h — the byte-level BPE tokenizer of Qwen2/Qwen3 (tokenizer.json),
 * bit-exact with Hugging Face `tokenizers` as used by the official pipeline
 * (Qwen2TokenizerFast), and the klein prompt encoding.
 *
 * Pipeline (Qwen3's tokenizer.json as Hugging Face tokenizers applies it), for a UTF-8 text:
 *   0. invalid UTF-8 → U+FFFD per maximal subpart (unicode.h);
 *   1. split on the added tokens (all of them, special or not, matched
 *      literally, leftmost then longest; "<|im_end|>" typed inside a prompt
 *      IS the token 151645, as in the reference);
 *   2. each remaining segment: NFC (unicode.h: Unicode 9.0 data, as the
 *      reference), then the Qwen2 split regex
 *        (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}
 *        | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *      implemented by hand with Oniguruma's semantics (leftmost-first
 *      alternatives with backtracking; (?i) also folds U+017F ſ to s);
 *   3. byte-level mapping and rank-ordered BPE merges per pre-token, with the
 *      reference's tie rule (lowest rank, then leftmost), vocab lookup.
 *
 * tokenizer.json is checked, not trusted: model.type BPE (no dropout, no
 * unk/byte fallback/prefix/suffix), normalizer NFC, pre_tokenizer exactly the
 * Qwen2 Split(regex, Isolated) + ByteLevel(add_prefix_space false,
 * use_regex false), post_processor null or ByteLevel, added tokens without
 * lstrip/rstrip/single_word. Anything else fails with FLUX_ERR_UNSUPPORTED
 * naming the field. Merges may be "a b" strings or ["a", "b"] pairs.
 *
 * A tokenizer keeps scratch buffers: one tokenizer must not be used by two
 * threads at once (it lives in a flux_ctx, which has the same rule).
 */
#ifndef FX_TOKENIZER_H
#define FX_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "src/base/error.h"

typedef struct fx_tokenizer fx_tokenizer;

/* A growable list of token ids (free with fx_ids_free). */
typedef struct fx_ids {
    int32_t *ids;
    size_t n, cap;
} fx_ids;

void fx_ids_free(fx_ids *ids);

/* Load a tokenizer.json file / its text (display names the source in
 * messages). Errors: FLUX_ERR_IO, FLUX_ERR_FORMAT (bad JSON, a missing or
 * mistyped field, a merge naming an unknown token), FLUX_ERR_UNSUPPORTED (a
 * tokenizer other than the Qwen2 byte-level BPE), FLUX_ERR_NOMEM. */
flux_status fx_tokenizer_load(const char *path, fx_tokenizer **out, fx_err *err);
flux_status fx_tokenizer_load_json(const char *text, size_t len, const char *display,
                                   fx_tokenizer **out, fx_err *err);
void fx_tokenizer_free(fx_tokenizer *tok);

/* The tokenizer of a GGUF file's tokenizer.ggml.* arrays (llama.cpp
 * convert_hf_to_gguf.py, get_vocab_base / gguf-py SpecialVocab):
 * tokenizer.ggml.model "gpt2", tokenizer.ggml.pre "qwen2", tokens[id] with
 * token_type[id] NORMAL (1, the BPE vocab), CONTROL (3, a special added
 * token) or USER_DEFINED (4, an added token), UNUSED (5, a "[PADn]" hole:
 * skipped), and the merges as "a b" strings in rank order. They are turned
 * into the tokenizer.json they came from (the Qwen2 pipeline of the
 * checks above) and loaded by fx_tokenizer_load_json, so every check
 * applies. Errors name the file and key: FLUX_ERR_UNSUPPORTED for another
 * tokenizer (model, pre, a BYTE or UNKNOWN token), FLUX_ERR_FORMAT for
 * missing or malformed arrays, FLUX_ERR_IO. */
flux_status fx_tokenizer_load_gguf(const char *path, fx_tokenizer **out, fx_err *err);

/* The split regex of the Qwen2 pre-tokenizer, as tokenizer.json stores it. */
extern const char fx_qwen2_split_regex[];

/* Sizes, for diagnostics and tests. */
size_t fx_tokenizer_vocab_size(const fx_tokenizer *tok);   /* model.vocab entries */
size_t fx_tokenizer_merge_count(const fx_tokenizer *tok);
size_t fx_tokenizer_added_count(const fx_tokenizer *tok);
/* Id of a token by its vocab or added-token text (byte-level form for the
 * vocab, e.g. "Ġthe"), or -1. */
int32_t fx_tokenizer_token_id(const fx_tokenizer *tok, const char *text);

/* Raw encoding of text[0, len) (any bytes; no template, no truncation, no
 * padding). The ids are APPENDED to out. Fails only with FLUX_ERR_NOMEM. */
flux_status fx_tokenizer_encode(fx_tokenizer *tok, const char *text, size_t len, fx_ids *out,
                                fx_err *err);

/* The klein chat template around a prompt (one user message, thinking
 * disabled):
 *   "<|im_start|>user\n" PROMPT "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
 * The prompt is inserted verbatim and the whole string encoded at once. */
#define FX_CHAT_PREFIX "<|im_start|>user\n"
#define FX_CHAT_SUFFIX "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"

/* Template + raw encoding, no truncation or padding; ids appended to out. */
flux_status fx_tokenizer_encode_chat(fx_tokenizer *tok, const char *prompt, size_t len, fx_ids *out,
                                     fx_err *err);

/* What the text encoder consumes: template, truncation to max_len from the
 * right (a long prompt loses the template tail, as in the reference), right
 * padding with <|endoftext|> (151643 for Qwen3) to exactly max_len, and the
 * attention mask (1 real, 0 padding). *n_real = tokens before padding
 * (<= max_len). ids and mask hold max_len entries (512 for klein). */
flux_status fx_tokenizer_encode_prompt(fx_tokenizer *tok, const char *prompt, int max_len,
                                       int32_t *ids, uint8_t *mask, int *n_real, fx_err *err);

/* The context's tokenizer, loaded on first use from the model's
 * tokenizer/tokenizer.json (FLUX_ERR_STATE before flux_load). It stays in
 * ctx->tokenizer until fx_ctx_release_model (src/pipeline/load.c) frees it. Errors go to
 * ctx->err. */
flux_status fx_ctx_tokenizer(flux_ctx *ctx, fx_tokenizer **out);

/* Testing aid: how many code points the encoder decodes and normalises at a
 * time (default 65536; 0 restores it). The ids never depend on it. */
void fx_tokenizer_set_window(fx_tokenizer *tok, size_t cps);

#endif
