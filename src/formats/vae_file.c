/*
 * vae_file.c — single-file FLUX.2 VAEs: BFL / LDM names mapped onto the
 * diffusers names (vae_file.h; black-forest-labs/flux2 src/flux2/autoencoder.py
 * ↔ diffusers autoencoder_kl_flux2.py).
 */
#include "vae_file.h"

#include "name_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A parameter suffix: "weight" or "bias". */
static int is_param(const char *s) { return !strcmp(s, "weight") || !strcmp(s, "bias"); }

/* A resnet's tensor "<layer>.<param>" (BFL) → diffusers suffix into out. */
static int resnet_part(const char *rest, char *out, size_t size) {
    static const char *const same[] = {"norm1.", "conv1.", "norm2.", "conv2."};
    for (int k = 0; k < 4; k++)
        if (!strncmp(rest, same[k], strlen(same[k])) && is_param(rest + strlen(same[k])))
            return snprintf(out, size, "%s", rest) < (int)size;
    if (!strncmp(rest, "nin_shortcut.", 13) && is_param(rest + 13))
        return snprintf(out, size, "conv_shortcut.%s", rest + 13) < (int)size;
    return 0;
}

/* "{encoder,decoder}.mid.*" after the side: resnets and the attention. */
static int mid_part(const char *side, const char *rest, char *out, size_t size) {
    char part[96];
    int r = -1;
    if (!strncmp(rest, "block_1.", 8)) r = 0;
    if (!strncmp(rest, "block_2.", 8)) r = 1;
    if (r >= 0)
        return resnet_part(rest + 8, part, sizeof part) &&
               snprintf(out, size, "%s.mid_block.resnets.%d.%s", side, r, part) < (int)size;
    if (strncmp(rest, "attn_1.", 7)) return 0;
    rest += 7;
    static const struct {
        const char *bfl, *diffusers;
        int matrix;
    } attn[] = {{"norm.", "group_norm.", 0}, {"q.", "to_q.", 1}, {"k.", "to_k.", 1},
                {"v.", "to_v.", 1},          {"proj_out.", "to_out.0.", 1}};
    for (size_t k = 0; k < sizeof attn / sizeof *attn; k++) {
        size_t n = strlen(attn[k].bfl);
        if (strncmp(rest, attn[k].bfl, n) || !is_param(rest + n)) continue;
        if (snprintf(out, size, "%s.mid_block.attentions.0.%s%s", side, attn[k].diffusers, rest + n) >= (int)size)
            return 0;
        return attn[k].matrix && !strcmp(rest + n, "weight") ? 2 : 1;
    }
    return 0;
}

int fx_vae_bfl_name(const char *name, int levels, char *out, size_t size) {
    char part[96];
    const char *rest;
    int i, j;
    if (!strcmp(name, "bn.running_mean") || !strcmp(name, "bn.running_var") || !strcmp(name, "bn.num_batches_tracked"))
        return snprintf(out, size, "%s", name) < (int)size;
    if (!strncmp(name, "encoder.quant_conv.", 19) && is_param(name + 19))
        return snprintf(out, size, "quant_conv.%s", name + 19) < (int)size;
    if (!strncmp(name, "decoder.post_quant_conv.", 24) && is_param(name + 24))
        return snprintf(out, size, "post_quant_conv.%s", name + 24) < (int)size;
    const char *side = !strncmp(name, "encoder.", 8) ? "encoder" : !strncmp(name, "decoder.", 8) ? "decoder" : NULL;
    if (!side) return 0;
    rest = name + 8;
    if ((!strncmp(rest, "conv_in.", 8) && is_param(rest + 8)) || (!strncmp(rest, "conv_out.", 9) && is_param(rest + 9)))
        return snprintf(out, size, "%s", name) < (int)size;
    if (!strncmp(rest, "norm_out.", 9) && is_param(rest + 9))
        return snprintf(out, size, "%s.conv_norm_out.%s", side, rest + 9) < (int)size;
    if (!strncmp(rest, "mid.", 4)) return mid_part(side, rest + 4, out, size);
    const int enc = side[0] == 'e';
    const char *lv = fx_name_after_index(rest, enc ? "down." : "up.", &i);
    if (!lv) return 0;
    if (!enc) {
        if (i >= levels) return 0;
        i = levels - 1 - i; /* LDM counts decoder levels from the image end */
    }
    const char *blk = fx_name_after_index(lv, "block.", &j);
    if (blk)
        return resnet_part(blk, part, sizeof part) &&
               snprintf(out, size, "%s.%s.%d.resnets.%d.%s", side, enc ? "down_blocks" : "up_blocks", i, j, part) <
                   (int)size;
    const char *sample = enc ? "downsample.conv." : "upsample.conv.";
    if (!strncmp(lv, sample, strlen(sample)) && is_param(lv + strlen(sample)))
        return snprintf(out, size, "%s.%s.%d.%s.0.conv.%s", side, enc ? "down_blocks" : "up_blocks", i,
                        enc ? "downsamplers" : "upsamplers", lv + strlen(sample)) < (int)size;
    return 0;
}

static const char *const prefixes[] = {"first_stage_model.", "vae."};

/* The prefix every VAE tensor of the file carries ("" if none). */
static const char *common_prefix(const fx_wset *w) {
    for (size_t k = 0; k < sizeof prefixes / sizeof *prefixes; k++)
        for (size_t i = 0; i < fx_wset_count(w); i++) {
            const char *name = fx_wset_tensor_at(w, i)->name;
            size_t n = strlen(prefixes[k]);
            if (!strncmp(name, prefixes[k], n) &&
                (!strncmp(name + n, "encoder.", 8) || !strncmp(name + n, "decoder.", 8)))
                return prefixes[k];
        }
    return "";
}

fx_wset *fx_vae_file_open(const char *path, int use_mmap, const fx_logger *log, fx_err *err) {
    fx_wset *base = fx_wset_open(path, path, use_mmap, err);
    if (!base) return NULL;
    const size_t n = fx_wset_count(base);
    const char *prefix = common_prefix(base);
    const size_t plen = strlen(prefix);
    size_t bfl = 0, diffusers = 0;
    int levels = 0, i;
    for (size_t k = 0; k < n; k++) {
        const char *name = fx_wset_tensor_at(base, k)->name;
        if (strncmp(name, prefix, plen)) continue;
        name += plen;
        if (!strncmp(name, "encoder.down.", 13) || !strncmp(name, "decoder.up.", 11) || !strncmp(name, "encoder.mid.", 12) ||
            !strncmp(name, "decoder.mid.", 12))
            bfl++;
        if (!strncmp(name, "encoder.down_blocks.", 20) || !strncmp(name, "decoder.up_blocks.", 18) ||
            !strncmp(name, "encoder.mid_block.", 18) || !strncmp(name, "decoder.mid_block.", 18))
            diffusers++;
        if (fx_name_after_index(name, "decoder.up.", &i) && i + 1 > levels) levels = i + 1;
    }
    if (!bfl && !diffusers) {
        fx_wset_close(base);
        fx_fail(err, FLUX_ERR_MODEL,
                "%s: not a FLUX.2 VAE: no BFL (encoder.down.N.block.M.*) or diffusers (encoder.down_blocks.N.*) tensor "
                "names", path);
        return NULL;
    }
    if (bfl && diffusers) {
        fx_wset_close(base);
        fx_fail(err, FLUX_ERR_MODEL, "%s: mixes BFL (%zu) and diffusers (%zu) VAE tensor names", path, bfl, diffusers);
        return NULL;
    }
    if (diffusers && !plen) {
        fx_log(log, 1, "flux: %s: VAE with diffusers names, %zu tensors", path, n);
        return base;
    }
    fx_wset *view = fx_wset_view_new(base, path, n, err);
    if (!view) return NULL;
    size_t ignored = 0;
    for (size_t k = 0; k < n; k++) {
        const fx_tensor *t = fx_wset_tensor_at(base, k);
        char mapped[FX_ST_MAX_NAME];
        int kind = 1;
        if (strncmp(t->name, prefix, plen)) {
            ignored++;
            continue;
        }
        if (bfl) {
            kind = fx_vae_bfl_name(t->name + plen, levels, mapped, sizeof mapped);
        } else if (snprintf(mapped, sizeof mapped, "%s", t->name + plen) >= (int)sizeof mapped) {
            kind = 0;
        }
        if (!kind) {
            fx_fail(err, FLUX_ERR_MODEL, "%s: tensor '%.200s' is not part of a FLUX.2 VAE (BFL layout)", path, t->name);
            fx_wset_close(view);
            return NULL;
        }
        /* a scalar (bn.num_batches_tracked) has no rows: shown as it is */
        fx_wset_range r = {t->name, 0, t->shape.ndim ? t->shape.d[0] : 0};
        if (t->shape.ndim == 0) {
            ignored++;
            continue;
        }
        if (fx_wset_view_add(view, mapped, &r, 1, err) ||
            (kind == 2 && fx_wset_view_as_matrix(view, mapped, err))) {
            fx_wset_close(view);
            return NULL;
        }
    }
    fx_log(log, 1, "flux: %s: VAE with %s names%s%s, %zu tensors mapped, %zu ignored", path,
           bfl ? "BFL" : "diffusers", plen ? ", prefix " : "", prefix, fx_wset_count(view), ignored);
    return view;
}
