/*
 * fuzz_png.c — libFuzzer target for the image decoders (PNG via libpng,
 * binary PPM/PGM), built by `make fuzz-build` with clang and ASan/UBSan.
 *
 * Every input must either decode into a sane RGB image or fail with a
 * message; never crash, leak or allocate absurdly. A decoded image is also
 * written back as PNG (pixels and metadata) and decoded again, which must
 * give the same pixels: the encoder is exercised with whatever metadata a
 * hostile file carried. The decoder that keeps transparency
 * (fx_image_decode_alpha) must succeed on the same inputs.
 *
 *   make fuzz FUZZ_SECONDS=300   (or build/fuzz/fuzz_png -max_total_time=300 DIR)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flux.h"
#include "src/base/error.h"
#include "src/image/codecs.h"
#include "src/image/image_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fx_err err;
    flux_image *img = NULL;
    if (fx_image_decode(data, size, "fuzz", &img, &err) != FLUX_OK) {
        if (img || !err.msg[0]) abort(); /* failures return no image and say why */
        return 0;
    }
    if (!img || img->channels != 3 || !fx_image_size_ok(img->width, img->height)) abort();
    /* Touch every pixel so ASan sees any short allocation. */
    unsigned sum = 0;
    size_t n = (size_t)img->width * (size_t)img->height * 3;
    for (size_t i = 0; i < n; i++) sum += img->data[i];
    (void)sum;
    for (int i = 0; i < img->n_text; i++)
        if (!img->text_keys[i] || !img->text_values[i]) abort();

    /* The decode that keeps transparency (inpainting masks) reads the same
     * colours, plus alpha when the file has any. */
    flux_image *rgba = NULL;
    if (fx_image_decode_alpha(data, size, "fuzz", &rgba, &err) != FLUX_OK) abort();
    if (rgba->width != img->width || rgba->height != img->height || (rgba->channels != 3 && rgba->channels != 4))
        abort();
    for (size_t i = 0, np = (size_t)img->width * (size_t)img->height; i < np; i++)
        if (memcmp(rgba->data + i * (size_t)rgba->channels, img->data + i * 3, 3)) abort();
    flux_image_free(rgba);

    /* Re-encode (small images only, to keep the fuzzer fast) and decode. */
    if (n <= (1u << 20)) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (f) {
            flux_status s = fx_png_write(f, img, "fuzz-out.png", &err);
            fclose(f);
            if (s == FLUX_OK) {
                flux_image *back = NULL;
                if (fx_png_decode((const uint8_t *)buf, len, "fuzz-out.png", &back, &err) != FLUX_OK) abort();
                if (back->width != img->width || back->height != img->height || memcmp(back->data, img->data, n))
                    abort();
                flux_image_free(back);
            }
            free(buf);
        }
    }
    flux_image_free(img);
    return 0;
}
