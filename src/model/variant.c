/*
 * variant.c — distilled or base from the hints of the files (variant.h).
 */
#include "variant.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* -1 no hint; 0 base; 1 distilled: from a free-text name. */
static int hint_of_text(const char *s) {
    if (!s) return -1;
    for (const char *p = s; *p; p++)
        if (!strncasecmp(p, "base", 4)) return 0;
    for (const char *p = s; *p; p++)
        if (!strncasecmp(p, "distill", 7)) return 1;
    return -1;
}

/* The hint in the metadata of the set's first file, its key into key. */
static int hint_of_metadata(const fx_wset *w, char *key, size_t size) {
    const fx_tensor_file *f = w && fx_wset_file_count(w) ? fx_wset_file_at(w, 0) : NULL;
    if (!f) return -1;
    const char *v = fx_tensor_file_metadata(f, "is_distilled");
    if (v && (!strcasecmp(v, "true") || !strcasecmp(v, "false"))) {
        snprintf(key, size, "is_distilled = %s", v);
        return !strcasecmp(v, "true");
    }
    static const char *const names[] = {"modelspec.title", "modelspec.architecture", "general.name",
                                        "general.basename", "general.finetune", "name"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        int h = hint_of_text(v = fx_tensor_file_metadata(f, names[i]));
        if (h >= 0) {
            snprintf(key, size, "%s = \"%.80s\"", names[i], v);
            return h;
        }
    }
    return -1;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

void fx_variant_decide(int forced, int folder_distilled, const fx_wset *file_set, const char *file_path,
                       const fx_logger *log, int *distilled, char *why, size_t why_size) {
    char key[160];
    int h;
    if (forced >= 0) {
        *distilled = forced != 0;
        snprintf(why, why_size, "forced (%s)", forced ? "--distilled" : "--base");
        return;
    }
    if (file_path && (h = hint_of_metadata(file_set, key, sizeof key)) >= 0) {
        *distilled = h;
        snprintf(why, why_size, "%s metadata %s", base_name(file_path), key);
        if (folder_distilled >= 0 && folder_distilled != h)
            fx_log(log, 0, "flux: warning: %s is %s by its metadata (%s), the folder's model_index.json says %s; "
                   "running it as %s (--base / --distilled to override)", file_path, h ? "distilled" : "base", key,
                   folder_distilled ? "distilled" : "base", h ? "distilled" : "base");
        return;
    }
    const int name_hint = file_path ? hint_of_text(base_name(file_path)) : -1;
    if (folder_distilled >= 0) {
        if (name_hint == 0 && folder_distilled) {
            *distilled = 0;
            snprintf(why, why_size, "file name %s (the folder says distilled)", base_name(file_path));
            fx_log(log, 0, "flux: warning: %s is named as a base model but the folder's model_index.json says "
                   "distilled; running it as base (50 steps, CFG; --distilled to override)", file_path);
            return;
        }
        *distilled = folder_distilled;
        snprintf(why, why_size, "model_index.json is_distilled%s", folder_distilled ? "" : " absent or false");
        return;
    }
    *distilled = name_hint != 0;
    if (name_hint == 0) {
        snprintf(why, why_size, "file name %s contains \"base\"", base_name(file_path));
    } else {
        snprintf(why, why_size, "assumed: file name %s does not contain \"base\"", base_name(file_path));
    }
    fx_log(log, 0, "flux: warning: %s carries no variant metadata; running it as %s from its file name (--base / "
           "--distilled to say which)", file_path, *distilled ? "distilled" : "base");
}
