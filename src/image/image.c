/*
 * image.c — the flux_image type (pixels + text metadata). Codecs live in
 * image_png.c and image_ppm.c, files by format in image_file.c.
 */
#include "image.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

int fx_image_size_ok(int64_t width, int64_t height) {
    return width >= 1 && height >= 1 && width <= FX_IMAGE_MAX_SIDE && height <= FX_IMAGE_MAX_SIDE &&
           width * height <= FX_IMAGE_MAX_PIXELS;
}

flux_image *flux_image_new(int width, int height, int channels) {
    if (!fx_image_size_ok(width, height) || channels < 1 || channels > 4) return NULL;
    flux_image *img = calloc(1, sizeof *img);
    if (!img) return NULL;
    img->data = calloc((size_t)width * (size_t)height, (size_t)channels);
    if (!img->data) {
        free(img);
        return NULL;
    }
    img->width = width;
    img->height = height;
    img->channels = channels;
    return img;
}

void flux_image_free(flux_image *img) {
    if (!img) return;
    for (int i = 0; i < img->n_text; i++) {
        free(img->text_keys[i]);
        free(img->text_values[i]);
    }
    free(img->text_keys);
    free(img->text_values);
    free(img->data);
    free(img);
}

static int find_text(const flux_image *img, const char *key) {
    for (int i = 0; i < img->n_text; i++)
        if (!strcmp(img->text_keys[i], key)) return i;
    return -1;
}

const char *flux_image_get_text(const flux_image *img, const char *key) {
    if (!img || !key) return NULL;
    int i = find_text(img, key);
    return i < 0 ? NULL : img->text_values[i];
}

flux_status flux_image_set_text(flux_image *img, const char *key, const char *value) {
    if (!img || !key || !*key) return FLUX_ERR_INVALID_ARG;
    int i = find_text(img, key);
    if (!value) { /* NULL removes the entry */
        if (i < 0) return FLUX_OK;
        free(img->text_keys[i]);
        free(img->text_values[i]);
        memmove(img->text_keys + i, img->text_keys + i + 1, (size_t)(img->n_text - i - 1) * sizeof(char *));
        memmove(img->text_values + i, img->text_values + i + 1, (size_t)(img->n_text - i - 1) * sizeof(char *));
        img->n_text--;
        return FLUX_OK;
    }
    char *v = strdup(value);
    if (!v) return FLUX_ERR_NOMEM;
    if (i >= 0) {
        free(img->text_values[i]);
        img->text_values[i] = v;
        return FLUX_OK;
    }
    char *k = strdup(key);
    char **keys = realloc(img->text_keys, (size_t)(img->n_text + 1) * sizeof(char *));
    if (keys) img->text_keys = keys;
    char **vals = realloc(img->text_values, (size_t)(img->n_text + 1) * sizeof(char *));
    if (vals) img->text_values = vals;
    if (!k || !keys || !vals) {
        free(k);
        free(v);
        return FLUX_ERR_NOMEM;
    }
    img->text_keys[img->n_text] = k;
    img->text_values[img->n_text] = v;
    img->n_text++;
    return FLUX_OK;
}
