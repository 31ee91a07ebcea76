/*
 * fuzz_lora.c — libFuzzer target for LoRA / LyCORIS adapter files
 * (src/adapters/lora.c, lora_keys.c: the key parser, module resolution and
 * every check), against the tiny golden model's transformer
 * (tests/golden/model, or $FUZZ_LORA_MODEL = a transformer .safetensors).
 *
 * The input is a whole adapter file, handed over through a memfd: opening
 * must succeed or fail with a message; an opened adapter must hold modules
 * whose pieces lie inside their model tensors and whose terms pass the
 * kernel contract (fx_delta_check) whole and cut to each piece, as the
 * transformer attaches them. The input is also classified as one key name
 * (fx_lora_parse_key, fx_lora_flat_name). The GEMM behind fx_linear (the
 * f32 products of factored LoKr / LoHa) is a plain reference loop here
 * (fx_gemm_linear): the kernels are tested elsewhere; this target is about
 * the file.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/fuzz/fuzz_gemm_ref.h"
#include "tests/fuzz/fuzz_memfd.h"

#include "src/adapters/lora.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond) {
    if (!cond) abort();
}

static fx_wset *model(void) {
    static fx_wset *m;
    if (!m) {
        const char *path = getenv("FUZZ_LORA_MODEL");
        fx_err err = {0};
        m = fx_wset_open(path ? path : "tests/golden/model/transformer/diffusion_pytorch_model.safetensors", NULL, 1, &err);
        if (!m) {
            fprintf(stderr, "fuzz_lora: %s (run from the repository root or set FUZZ_LORA_MODEL)\n", err.msg);
            abort();
        }
    }
    return m;
}

static void check_adapter(const fx_lora *l, const fx_lora_report *rep) {
    check(rep->modules == fx_lora_count(l) && rep->modules > 0);
    check(rep->unmatched + rep->text_encoder <= rep->keys);
    /* unmatched keys are counted first; otherwise the warning, if any, is the
     * text-encoder one (key names quoted in it may contain any words) */
    const char *w = rep->warning, *space = strchr(w, ' ');
    if (rep->unmatched) check(strstr(w, " no module of the transformer and ") != NULL);
    else check(!w[0] || (space && !strncmp(space, " text-encoder key", 17)));
    for (size_t i = 0; i < fx_lora_count(l); i++) {
        const fx_lora_module *m = fx_lora_module_at(l, i);
        char why[200];
        fx_delta whole = m->delta;
        whole.scale = 1.0f;
        check(m->key && m->n_pieces >= 1 && m->n_pieces <= 3);
        check(fx_delta_check(&whole, whole.rows, m->in, why, sizeof why) == 0);
        for (int p = 0; p < m->n_pieces; p++) {
            const fx_lora_piece *pc = &m->piece[p];
            const fx_tensor *t = fx_wset_find(model(), pc->tensor);
            check(t && t->shape.ndim == 2 && t->shape.d[1] == m->in);
            check(pc->rows >= 1 && pc->tensor_row0 >= 0 && pc->tensor_row0 + pc->rows <= t->shape.d[0]);
            check(pc->src_row0 >= 0 && pc->src_row0 + pc->rows <= whole.rows);
            fx_delta cut = fx_delta_rows(&whole, pc->src_row0, pc->rows, pc->tensor_row0);
            check(fx_delta_check(&cut, t->shape.d[0], t->shape.d[1], why, sizeof why) == 0);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* the bytes as one key name */
    char key[512];
    size_t kn = size < sizeof key - 1 ? size : sizeof key - 1;
    memcpy(key, data, kn);
    key[kn] = '\0';
    fx_lora_key k;
    fx_lora_parse_key(key, &k);
    check(k.stem_len <= strlen(key) && (k.part != FX_LORA_REFUSED || k.scheme));
    char flat[64];
    size_t need = fx_lora_flat_name(key, k.stem_len, flat, sizeof flat);
    check(strlen(flat) < sizeof flat && strlen(flat) + 1 <= need && !strchr(flat, '.'));

    char path[64];
    int fd = fuzz_memfd(data, size, path);
    if (fd < 0) return 0;
    fx_err err = {0};
    fx_lora_report rep;
    /* a kernel context, as fx_lora_open requires (LoKr / LoHa products read
     * it: one thread, no int8; a NULL one crashed in linear.c's product()) */
    static const fx_kctx kc = {.threads = 1};
    fx_lora *l = fx_lora_open(path, model(), &kc, (int)(size & 1), &rep, &err);
    if (!l) check(err.code != FLUX_OK && err.msg[0]);
    else check_adapter(l, &rep);
    fx_lora_free(l);
    close(fd);
    return 0;
}
