/*
 * vk_memory.c — device buffers and host transfers.
 *
 * One VkBuffer with its own allocation per fx_vk_buf. Where the device's
 * local memory is also host-visible and coherent (lavapipe, integrated GPUs,
 * resizable BAR) buffers stay mapped and transfers are memcpy; elsewhere
 * they go through a host-visible staging buffer in chunks, one copy command
 * and one fence wait per chunk. Sizes are checked against the heap and the
 * allocation limit first, so an impossible request is an error naming the
 * size, not a driver failure.
 */
#include "vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAGING_BYTES ((uint64_t)16 << 20)

static double gib(uint64_t b) { return (double)b / (double)(1u << 30); }

/* A memory type of `bits` with all of `need` (preferring `want` too), or -1. */
static int memory_type(const VkPhysicalDeviceMemoryProperties *mem, uint32_t bits,
                       VkMemoryPropertyFlags need, VkMemoryPropertyFlags want) {
    int fallback = -1;
    for (uint32_t t = 0; t < mem->memoryTypeCount; t++) {
        if (!(bits & (1u << t))) continue;
        VkMemoryPropertyFlags p = mem->memoryTypes[t].propertyFlags;
        if ((p & need) != need) continue;
        if ((p & want) == want) return (int)t;
        if (fallback < 0) fallback = (int)t;
    }
    return fallback;
}

/* host: 1 = a mapped staging buffer, 0 = a device buffer. */
static flux_status buf_create(fx_vk *vk, uint64_t bytes, const char *what, int host, fx_vk_buf **out,
                              fx_err *err) {
    *out = NULL;
    if (bytes == 0) bytes = 4;
    bytes = (bytes + 15) & ~(uint64_t)15;
    if (bytes > vk->info.max_allocation)
        return fx_fail(err, FLUX_ERR_NOMEM,
                       "Vulkan: %s needs %llu bytes (%.2f GiB), over the device's largest allocation of "
                       "%.2f GiB (%s)", what, (unsigned long long)bytes, gib(bytes), gib(vk->info.max_allocation),
                       vk->info.name);
    if (vk->info.device_memory && bytes > vk->info.device_memory)
        return fx_fail(err, FLUX_ERR_NOMEM,
                       "Vulkan: out of device memory: %s needs %llu bytes (%.2f GiB), the device has "
                       "%.2f GiB (%s)", what, (unsigned long long)bytes, gib(bytes), gib(vk->info.device_memory),
                       vk->info.name);
    fx_vk_buf *b = calloc(1, sizeof *b);
    if (!b) return fx_fail(err, FLUX_ERR_NOMEM, "Vulkan: out of host memory for %s", what);
    snprintf(b->what, sizeof b->what, "%s", what);
    b->bytes = bytes;
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = bytes,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkResult r = vk->f.vkCreateBuffer(vk->dev, &bci, NULL, &b->buf);
    if (r != VK_SUCCESS) {
        free(b);
        if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
            return fx_fail(err, FLUX_ERR_NOMEM, "Vulkan: out of memory creating %s (%llu bytes): %s", what,
                           (unsigned long long)bytes, vk_result_name(r));
        return vk_fail(vk, err, r, "vkCreateBuffer");
    }
    VkMemoryRequirements req;
    vk->f.vkGetBufferMemoryRequirements(vk->dev, b->buf, &req);
    const VkMemoryPropertyFlags visible = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int type;
    int map = host;
    if (host) {
        type = memory_type(&vk->mem, req.memoryTypeBits, visible, VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    } else if (vk->device_mapped) {
        type = memory_type(&vk->mem, req.memoryTypeBits, visible | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
        map = 1;
    } else {
        type = memory_type(&vk->mem, req.memoryTypeBits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
        if (type < 0) type = memory_type(&vk->mem, req.memoryTypeBits, 0, 0);
    }
    if (type < 0) {
        vk->f.vkDestroyBuffer(vk->dev, b->buf, NULL);
        free(b);
        return fx_fail(err, FLUX_ERR_UNSUPPORTED, "Vulkan: no suitable memory type for %s", what);
    }
    VkMemoryAllocateInfo mai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = (uint32_t)type,
    };
    r = vk->f.vkAllocateMemory(vk->dev, &mai, NULL, &b->mem);
    if (r != VK_SUCCESS) {
        vk->f.vkDestroyBuffer(vk->dev, b->buf, NULL);
        free(b);
        if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
            return fx_fail(err, FLUX_ERR_NOMEM,
                           "Vulkan: out of device memory allocating %llu bytes (%.2f GiB) for %s (%s)",
                           (unsigned long long)req.size, gib(req.size), what, vk->info.name);
        return vk_fail(vk, err, r, "vkAllocateMemory");
    }
    r = vk->f.vkBindBufferMemory(vk->dev, b->buf, b->mem, 0);
    if (r == VK_SUCCESS && map) r = vk->f.vkMapMemory(vk->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &b->map);
    if (r != VK_SUCCESS) {
        vk_buf_destroy(vk, b);
        return vk_fail(vk, err, r, map ? "vkMapMemory" : "vkBindBufferMemory");
    }
    *out = b;
    return FLUX_OK;
}

void vk_buf_destroy(fx_vk *vk, fx_vk_buf *b) {
    if (!b) return;
    if (b->map) vk->f.vkUnmapMemory(vk->dev, b->mem);
    if (b->buf) vk->f.vkDestroyBuffer(vk->dev, b->buf, NULL);
    if (b->mem) vk->f.vkFreeMemory(vk->dev, b->mem, NULL);
    free(b);
}

flux_status vk_memory_init(fx_vk *vk, fx_err *err) {
    vk->f.vkGetPhysicalDeviceMemoryProperties(vk->phys, &vk->mem);
    vk->device_mapped = vk->info.unified_memory && !vk->opts.force_staging;
    TRY(buf_create(vk, 256, "the dummy binding", 0, &vk->dummy, err));
    if (!vk->device_mapped) TRY(buf_create(vk, STAGING_BYTES, "the staging buffer", 1, &vk->staging, err));
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
    return buf_create(vk, bytes, what ? what : "a buffer", 0, out, err);
}

void fx_vk_buf_free(fx_vk *vk, fx_vk_buf *b) {
    if (b) vk_defer_free(vk, b);
}

uint64_t fx_vk_buf_bytes(const fx_vk_buf *b) { return b ? b->bytes : 0; }

flux_status vk_scratch(fx_vk *vk, uint64_t bytes, fx_vk_buf **out, fx_err *err) {
    if (!vk->scratch || vk->scratch->bytes < bytes) {
        uint64_t want = bytes < 4096 ? 4096 : bytes + bytes / 2;
        fx_vk_buf *b;
        TRY(buf_create(vk, want, "the scratch buffer", 0, &b, err));
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

flux_status fx_vk_sync(fx_vk *vk, fx_err *err) { return vk_submit_wait(vk, err); }
