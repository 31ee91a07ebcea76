/*
 * vk_memory.c — the public buffer calls and host transfers.
 *
 * One VkBuffer with its own allocation per fx_vk_buf (vk_buffer.c). Where
 * the device's local memory is also host-visible and coherent (lavapipe,
 * integrated GPUs, resizable BAR) buffers stay mapped and transfers are
 * memcpy; elsewhere they go through a host-visible staging buffer in chunks,
 * one copy command and one fence wait per chunk (through the recorder).
 */
#include "vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAGING_BYTES ((uint64_t)16 << 20)

flux_status vk_memory_init(fx_vk *vk, fx_err *err) {
    vk->f.vkGetPhysicalDeviceMemoryProperties(vk->phys, &vk->mem);
    vk->device_mapped = vk->info.unified_memory && !vk->opts.force_staging;
    TRY(vk_buf_create(vk, 256, "the dummy binding", 0, &vk->dummy, err));
    if (!vk->device_mapped) TRY(vk_buf_create(vk, STAGING_BYTES, "the staging buffer", 1, &vk->staging, err));
    return FLUX_OK;
}

void vk_memory_destroy(fx_vk *vk) {
    vk_buf_destroy(vk, vk->dummy);
    vk_buf_destroy(vk, vk->staging);
    vk_buf_destroy(vk, vk->scratch);
    vk->dummy = vk->staging = vk->scratch = NULL;
}

flux_status fx_vk_buf_new(fx_vk *vk, uint64_t bytes, const char *what, fx_vk_buf **out, fx_err *err) {
    *out = NULL;
    TRY(vk_check_alive(vk, err));
    return vk_buf_create(vk, bytes, what ? what : "a buffer", 0, out, err);
}

void fx_vk_buf_free(fx_vk *vk, fx_vk_buf *b) {
    if (b) vk_defer_free(vk, b);
}

uint64_t fx_vk_buf_bytes(const fx_vk_buf *b) { return b ? b->bytes : 0; }

flux_status vk_scratch(fx_vk *vk, uint64_t bytes, fx_vk_buf **out, fx_err *err) {
    if (!vk->scratch || vk->scratch->bytes < bytes) {
        uint64_t want = bytes < 4096 ? 4096 : bytes + bytes / 2;
        fx_vk_buf *b;
        TRY(vk_buf_create(vk, want, "the scratch buffer", 0, &b, err));
        if (vk->scratch) vk_defer_free(vk, vk->scratch);
        vk->scratch = b;
    }
    *out = vk->scratch;
    return FLUX_OK;
}

static flux_status check_range(const fx_vk_buf *b, uint64_t offset, uint64_t bytes, const char *op,
                               fx_err *err) {
    if (!b) return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan %s: buffer is NULL", op);
    if (offset > b->bytes || bytes > b->bytes - offset)
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "Vulkan %s: bytes [%llu, %llu) outside %s (%llu bytes)", op, (unsigned long long)offset,
                       (unsigned long long)(offset + bytes), b->what, (unsigned long long)b->bytes);
    return FLUX_OK;
}

/* One chunk through the staging buffer: record a copy, submit, wait. */
static flux_status staged_copy(fx_vk *vk, const fx_vk_buf *src, uint64_t soff, const fx_vk_buf *dst,
                               uint64_t doff, uint64_t bytes, fx_err *err) {
    TRY(vk_begin(vk, err));
    VkBufferCopy region = {.srcOffset = soff, .dstOffset = doff, .size = bytes};
    vk->f.vkCmdCopyBuffer(vk->cmd, src->buf, dst->buf, 1, &region);
    vk->dispatches++;
    return vk_submit_wait(vk, err);
}

flux_status fx_vk_upload(fx_vk *vk, fx_vk_buf *dst, uint64_t offset, const void *src, uint64_t bytes,
                         fx_err *err) {
    TRY(check_range(dst, offset, bytes, "upload", err));
    TRY(vk_submit_wait(vk, err));
    if (bytes == 0) return FLUX_OK;
    if (dst->map) {
        memcpy((char *)dst->map + offset, src, bytes);
        return FLUX_OK;
    }
    for (uint64_t done = 0; done < bytes;) {
        uint64_t n = bytes - done < vk->staging->bytes ? bytes - done : vk->staging->bytes;
        memcpy(vk->staging->map, (const char *)src + done, n);
        TRY(staged_copy(vk, vk->staging, 0, dst, offset + done, n, err));
        done += n;
    }
    return FLUX_OK;
}

flux_status fx_vk_download(fx_vk *vk, const fx_vk_buf *src, uint64_t offset, void *dst, uint64_t bytes,
                           fx_err *err) {
    TRY(check_range(src, offset, bytes, "download", err));
    TRY(vk_submit_wait(vk, err));
    if (bytes == 0) return FLUX_OK;
    if (src->map) {
        memcpy(dst, (const char *)src->map + offset, bytes);
        return FLUX_OK;
    }
    for (uint64_t done = 0; done < bytes;) {
        uint64_t n = bytes - done < vk->staging->bytes ? bytes - done : vk->staging->bytes;
        TRY(staged_copy(vk, src, offset + done, vk->staging, 0, n, err));
        memcpy((char *)dst + done, vk->staging->map, n);
        done += n;
    }
    return FLUX_OK;
}

flux_status fx_vk_copy(fx_vk *vk, int64_t rows, int64_t cols, fx_vk_mat src, fx_vk_mat dst, fx_err *err) {
    if (rows <= 0 || cols <= 0) return FLUX_OK;
    TRY(vk_check_mat("copy", "source", src, rows, cols, err));
    TRY(vk_check_mat("copy", "destination", dst, rows, cols, err));
    int contiguous = rows == 1 || (src.ld == cols && dst.ld == cols);
    uint32_t n = contiguous ? 1 : (uint32_t)rows;
    if (!contiguous && rows > 65536)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan copy: %lld strided rows (at most 65536)", (long long)rows);
    VkBufferCopy *reg = malloc(n * sizeof *reg);
    if (!reg) return fx_fail(err, FLUX_ERR_NOMEM, "Vulkan copy: out of host memory");
    for (uint32_t i = 0; i < n; i++)
        reg[i] = (VkBufferCopy){
            .srcOffset = (uint64_t)(src.off + (int64_t)i * src.ld) * 4,
            .dstOffset = (uint64_t)(dst.off + (int64_t)i * dst.ld) * 4,
            .size = (uint64_t)(contiguous ? rows * cols : cols) * 4,
        };
    flux_status st = vk_copy_regions(vk, src.buf, dst.buf, reg, n, err);
    free(reg);
    return st;
}

flux_status fx_vk_sync(fx_vk *vk, fx_err *err) { return vk_submit_wait(vk, err); }
