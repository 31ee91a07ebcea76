/*
 * vk_buffer.c — one VkBuffer with its own allocation: create (sizes checked
 * against the heap and the allocation limit first, so an impossible request
 * is an error naming the size, not a driver failure) and destroy. Device
 * buffers are mapped when the device's local memory is host-visible.
 */
#include "vk_internal.h"

#include <stdio.h>
#include <stdlib.h>

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
flux_status vk_buf_create(fx_vk *vk, uint64_t bytes, const char *what, int host, fx_vk_buf **out,
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
    if (vk->opts.memory_limit && vk->allocated + bytes > vk->opts.memory_limit) /* as a full device */
        return fx_fail(err, FLUX_ERR_NOMEM, "Vulkan: out of device memory allocating %llu bytes (%.2f GiB) for %s (%s)",
                       (unsigned long long)bytes, gib(bytes), what, vk->info.name);
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
    vk->allocated += b->bytes; /* given back by vk_buf_destroy with the memory */
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
    if (b->mem) {
        vk->f.vkFreeMemory(vk->dev, b->mem, NULL);
        vk->allocated -= b->bytes;
    }
    free(b);
}
