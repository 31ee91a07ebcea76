/*
 * vk_recorder.c — one command buffer that collects every dispatch until a
 * sync, then one submit and one fence wait (with a time limit).
 *
 * Barriers: the recorder remembers the byte ranges dispatches have written
 * and read since the last barrier; a dispatch that reads a written range,
 * or writes a range touched at all, gets a compute→compute barrier first.
 * Independent dispatches (the Q, K and V projections, the row strips of a
 * split operation) therefore run without barriers between them.
 * Descriptor sets come from a chain of pools, all reset after each submit.
 * Each command buffer starts with a barrier against earlier submissions
 * (copies, dispatches) and ends with one that makes results visible to
 * the host.
 *
 * Binding windows: an operand is bound as the range of its buffer that an
 * operation reads or writes, never more than the device's
 * maxStorageBufferRange; the window start is aligned down to
 * minStorageBufferOffsetAlignment and shaders get the operand's first
 * 32-bit word inside the window as a push constant.
 */
#include "vk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

flux_status vk_recorder_init(fx_vk *vk, fx_err *err) {
    VkCommandPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
        .queueFamilyIndex = vk->queue_family,
    };
    VkResult r = vk->f.vkCreateCommandPool(vk->dev, &pci, NULL, &vk->cmd_pool);
    if (r != VK_SUCCESS) return vk_fail(vk, err, r, "vkCreateCommandPool");
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = vk->cmd_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    r = vk->f.vkAllocateCommandBuffers(vk->dev, &ai, &vk->cmd);
    if (r != VK_SUCCESS) return vk_fail(vk, err, r, "vkAllocateCommandBuffers");
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    r = vk->f.vkCreateFence(vk->dev, &fci, NULL, &vk->fence);
    if (r != VK_SUCCESS) return vk_fail(vk, err, r, "vkCreateFence");
    return FLUX_OK;
}

static void free_deferred(fx_vk *vk) {
    for (int i = 0; i < vk->ndeferred; i++) vk_buf_destroy(vk, vk->deferred[i]);
    vk->ndeferred = 0;
}

void vk_recorder_destroy(fx_vk *vk) {
    free_deferred(vk);
    free(vk->deferred);
    for (int i = 0; i < vk->npools; i++) vk->f.vkDestroyDescriptorPool(vk->dev, vk->pools[i], NULL);
    free(vk->pools);
    free(vk->hz_write);
    free(vk->hz_read);
    if (vk->fence) vk->f.vkDestroyFence(vk->dev, vk->fence, NULL);
    if (vk->cmd_pool) vk->f.vkDestroyCommandPool(vk->dev, vk->cmd_pool, NULL);
    vk->deferred = NULL, vk->pools = NULL, vk->hz_write = vk->hz_read = NULL;
    vk->npools = 0, vk->fence = VK_NULL_HANDLE, vk->cmd_pool = VK_NULL_HANDLE;
}

void vk_defer_free(fx_vk *vk, fx_vk_buf *b) {
    if (!vk->recording) {
        vk_buf_destroy(vk, b);
        return;
    }
    if (vk->ndeferred == vk->cap_deferred) {
        int cap = vk->cap_deferred ? 2 * vk->cap_deferred : 16;
        fx_vk_buf **p = realloc(vk->deferred, (size_t)cap * sizeof *p);
        if (!p) { /* cannot defer: wait, then free */
            vk_submit_wait(vk, NULL);
            vk_buf_destroy(vk, b);
            return;
        }
        vk->deferred = p, vk->cap_deferred = cap;
    }
    vk->deferred[vk->ndeferred++] = b;
}

static void memory_barrier(fx_vk *vk, VkPipelineStageFlags src, VkAccessFlags src_access,
                           VkPipelineStageFlags dst, VkAccessFlags dst_access) {
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = src_access,
        .dstAccessMask = dst_access,
    };
    vk->f.vkCmdPipelineBarrier(vk->cmd, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
}

#define STAGES_ALL (VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT)
#define ACCESS_ALL (VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | \
                    VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT)

flux_status vk_begin(fx_vk *vk, fx_err *err) {
    TRY(vk_check_alive(vk, err));
    if (vk->recording) return FLUX_OK;
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    VkResult r = vk->f.vkBeginCommandBuffer(vk->cmd, &bi);
    if (r != VK_SUCCESS) return vk_fail(vk, err, r, "vkBeginCommandBuffer");
    vk->recording = 1;
    vk->dispatches = 0;
    vk->nhz_write = vk->nhz_read = 0;
    memory_barrier(vk, STAGES_ALL, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, STAGES_ALL,
                   ACCESS_ALL);
    return FLUX_OK;
}

flux_status vk_submit_wait(fx_vk *vk, fx_err *err) {
    TRY(vk_check_alive(vk, err));
    if (!vk->recording) return FLUX_OK;
    memory_barrier(vk, STAGES_ALL, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                   VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_READ_BIT);
    VkResult r = vk->f.vkEndCommandBuffer(vk->cmd);
    vk->recording = 0;
    if (r != VK_SUCCESS) return vk_fail(vk, err, r, "vkEndCommandBuffer");
    if (vk->inject_lost) {
        vk->inject_lost = 0;
        return vk_fail(vk, err, VK_ERROR_DEVICE_LOST, "vkQueueSubmit");
    }
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = 1,
        .pCommandBuffers = &vk->cmd,
    };
    r = vk->f.vkQueueSubmit(vk->queue, 1, &si, vk->fence);
    if (r != VK_SUCCESS) return vk_fail(vk, err, r, "vkQueueSubmit");
    r = vk->f.vkWaitForFences(vk->dev, 1, &vk->fence, VK_TRUE, vk->timeout_ns);
    if (r != VK_SUCCESS) return vk_fail(vk, err, r, "vkWaitForFences");
    vk->f.vkResetFences(vk->dev, 1, &vk->fence);
    vk->f.vkResetCommandBuffer(vk->cmd, 0);
    for (int i = 0; i < vk->npools; i++) vk->f.vkResetDescriptorPool(vk->dev, vk->pools[i], 0);
    vk->pool_cur = 0;
    free_deferred(vk);
    return FLUX_OK;
}

flux_status vk_copy_regions(fx_vk *vk, const fx_vk_buf *src, const fx_vk_buf *dst, const VkBufferCopy *regions,
                            uint32_t n, fx_err *err) {
    TRY(vk_begin(vk, err));
    /* Copies are rare (once per step): a full barrier on both sides instead of range tracking. */
    memory_barrier(vk, STAGES_ALL, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, STAGES_ALL, ACCESS_ALL);
    vk->f.vkCmdCopyBuffer(vk->cmd, src->buf, dst->buf, n, regions);
    memory_barrier(vk, STAGES_ALL, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, STAGES_ALL, ACCESS_ALL);
    vk->nhz_write = vk->nhz_read = 0;
    vk->dispatches++;
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* Hazards                                                                  */
/* ------------------------------------------------------------------------ */

static int overlaps(const vk_range *set, int n, const vk_range *r) {
    for (int i = 0; i < n; i++)
        if (set[i].buf == r->buf && set[i].lo < r->hi && r->lo < set[i].hi) return 1;
    return 0;
}

static int push_range(vk_range **set, int *n, int *cap, const vk_range *r) {
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 64;
        vk_range *p = realloc(*set, (size_t)c * sizeof *p);
        if (!p) return -1;
        *set = p, *cap = c;
    }
    (*set)[(*n)++] = *r;
    return 0;
}

static void track(fx_vk *vk, const vk_bind *b, int nb) {
    int conflict = 0;
    for (int i = 0; i < nb && !conflict; i++) {
        vk_range r = {b[i].buf->buf, b[i].off, b[i].off + b[i].range};
        conflict = overlaps(vk->hz_write, vk->nhz_write, &r) ||
                   (b[i].write && overlaps(vk->hz_read, vk->nhz_read, &r));
    }
    if (conflict) {
        memory_barrier(vk, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                       VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
        vk->nhz_write = vk->nhz_read = 0;
    }
    for (int i = 0; i < nb; i++) {
        vk_range r = {b[i].buf->buf, b[i].off, b[i].off + b[i].range};
        int bad = b[i].write ? push_range(&vk->hz_write, &vk->nhz_write, &vk->cap_write, &r)
                             : push_range(&vk->hz_read, &vk->nhz_read, &vk->cap_read, &r);
        if (bad) { /* no memory to track: be conservative from now on */
            memory_barrier(vk, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                           VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                           VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
            vk->nhz_write = vk->nhz_read = 0;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                 */
/* ------------------------------------------------------------------------ */

static flux_status new_pool(fx_vk *vk, fx_err *err) {
    VkDescriptorPool *p = realloc(vk->pools, (size_t)(vk->npools + 1) * sizeof *p);
    if (!p) return fx_fail(err, FLUX_ERR_NOMEM, "Vulkan: out of host memory (descriptor pools)");
    vk->pools = p;
    VkDescriptorPoolSize size = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, VK_DESC_POOL_SETS * VK_MAX_BINDINGS};
    VkDescriptorPoolCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
        .maxSets = VK_DESC_POOL_SETS,
        .poolSizeCount = 1,
        .pPoolSizes = &size,
    };
    VkResult r = vk->f.vkCreateDescriptorPool(vk->dev, &ci, NULL, &vk->pools[vk->npools]);
    if (r != VK_SUCCESS) return vk_fail(vk, err, r, "vkCreateDescriptorPool");
    vk->npools++;
    return FLUX_OK;
}

static flux_status alloc_set(fx_vk *vk, VkDescriptorSetLayout dsl, VkDescriptorSet *set, fx_err *err) {
    for (;;) {
        if (vk->pool_cur == vk->npools) TRY(new_pool(vk, err));
        VkDescriptorSetAllocateInfo ai = {
            .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
            .descriptorPool = vk->pools[vk->pool_cur],
            .descriptorSetCount = 1,
            .pSetLayouts = &dsl,
        };
        VkResult r = vk->f.vkAllocateDescriptorSets(vk->dev, &ai, set);
        if (r == VK_SUCCESS) return FLUX_OK;
        if (r != VK_ERROR_OUT_OF_POOL_MEMORY && r != VK_ERROR_FRAGMENTED_POOL)
            return vk_fail(vk, err, r, "vkAllocateDescriptorSets");
        vk->pool_cur++;
    }
}

flux_status vk_dispatch(fx_vk *vk, const vk_pipeline *p, const vk_bind *b, const void *push, uint32_t gx,
                        uint32_t gy, uint32_t gz, fx_err *err) {
    if (gx == 0 || gy == 0 || gz == 0) return FLUX_OK;
    if (gx > 65535 || gy > 65535 || gz > 65535)
        return fx_fail(err, FLUX_ERR_INTERNAL, "Vulkan: %s: grid %ux%ux%u over the 65535 limit",
                       vk_shader_name(p->shader), gx, gy, gz);
    TRY(vk_begin(vk, err));
    VkDescriptorSet set;
    TRY(alloc_set(vk, p->dsl, &set, err));
    VkDescriptorBufferInfo info[VK_MAX_BINDINGS];
    VkWriteDescriptorSet w[VK_MAX_BINDINGS];
    for (int i = 0; i < p->nbind; i++) {
        info[i] = (VkDescriptorBufferInfo){b[i].buf->buf, b[i].off, b[i].range};
        w[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = set,
            .dstBinding = (uint32_t)i,
            .descriptorCount = 1,
            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .pBufferInfo = &info[i],
        };
    }
    vk->f.vkUpdateDescriptorSets(vk->dev, (uint32_t)p->nbind, w, 0, NULL);
    track(vk, b, p->nbind);
    vk->f.vkCmdBindPipeline(vk->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipe);
    vk->f.vkCmdBindDescriptorSets(vk->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout, 0, 1, &set, 0, NULL);
    if (p->push_bytes)
        vk->f.vkCmdPushConstants(vk->cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p->push_bytes, push);
    vk->f.vkCmdDispatch(vk->cmd, gx, gy, gz);
    vk->dispatches++;
    vk->dispatch_total++;
    return FLUX_OK;
}

/* ------------------------------------------------------------------------ */
/* Binding windows                                                          */
/* ------------------------------------------------------------------------ */

static uint64_t window_slack(const fx_vk *vk) {
    uint64_t a = vk->info.binding_align > 4 ? vk->info.binding_align : 4;
    return a - 4;
}

flux_status vk_window(fx_vk *vk, const fx_vk_buf *buf, uint64_t lo, uint64_t hi, int write, vk_bind *b,
                      uint32_t *base, fx_err *err) {
    if (!buf) {
        *b = (vk_bind){vk->dummy, 0, vk->dummy->bytes, 0};
        *base = 0;
        return FLUX_OK;
    }
    uint64_t align = vk->info.binding_align > 4 ? vk->info.binding_align : 4;
    uint64_t start = lo / align * align;
    uint64_t end = (hi + 3) & ~(uint64_t)3;
    if (end > buf->bytes) end = buf->bytes;
    if (end <= start) end = start + 4 <= buf->bytes ? start + 4 : buf->bytes;
    if (end - start > vk->max_binding)
        return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                       "Vulkan: a binding of %llu bytes of %s exceeds the device's limit of %llu bytes",
                       (unsigned long long)(end - start), buf->what, (unsigned long long)vk->max_binding);
    *b = (vk_bind){buf, start, end - start, write};
    *base = (uint32_t)((lo - start) / 4);
    return FLUX_OK;
}

int64_t vk_rows_per_window(const fx_vk *vk, uint64_t ld_bytes, uint64_t row_bytes) {
    uint64_t usable = vk->max_binding - window_slack(vk);
    if (row_bytes > usable) return 0;
    if (ld_bytes == 0) return INT64_MAX;
    uint64_t r = (usable - row_bytes) / ld_bytes + 1;
    return r > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)r;
}

/* ------------------------------------------------------------------------ */
/* Shared argument checks and windows of views                              */
/* ------------------------------------------------------------------------ */

static int64_t buf_floats(const fx_vk_buf *b) { return (int64_t)(b->bytes / 4); }

flux_status vk_check_mat(const char *op, const char *name, fx_vk_mat m, int64_t rows, int64_t cols,
                         fx_err *err) {
    if (rows <= 0 || cols <= 0) return FLUX_OK;
    if (!m.buf) return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan %s: %s has no buffer", op, name);
    if (m.off < 0 || (rows > 1 && m.ld < cols))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan %s: %s: offset %lld / ld %lld invalid for %lld columns",
                       op, name, (long long)m.off, (long long)m.ld, (long long)cols);
    int64_t end = m.off + (rows - 1) * (rows > 1 ? m.ld : 0) + cols;
    if (end > buf_floats(m.buf))
        return fx_fail(err, FLUX_ERR_INVALID_ARG,
                       "Vulkan %s: %s [%lld, %lld] (ld %lld, offset %lld) exceeds its buffer %s (%lld floats)", op,
                       name, (long long)rows, (long long)cols, (long long)m.ld, (long long)m.off, m.buf->what,
                       (long long)buf_floats(m.buf));
    return FLUX_OK;
}

flux_status vk_check_vec(const char *op, const char *name, fx_vk_vec v, int64_t n, int optional,
                         fx_err *err) {
    if (!v.buf) {
        if (optional) return FLUX_OK;
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan %s: %s is required", op, name);
    }
    if (v.off < 0 || v.off + n > buf_floats(v.buf))
        return fx_fail(err, FLUX_ERR_INVALID_ARG, "Vulkan %s: %s [%lld] at offset %lld exceeds its buffer %s", op,
                       name, (long long)n, (long long)v.off, v.buf->what);
    return FLUX_OK;
}

flux_status vk_window_rows(fx_vk *vk, fx_vk_mat m, int64_t r0, int64_t nr, int64_t cols, int write,
                           vk_bind *b, uint32_t *base, fx_err *err) {
    uint64_t lo = (uint64_t)(m.off + r0 * m.ld) * 4;
    uint64_t hi = (uint64_t)(m.off + (r0 + nr - 1) * m.ld + cols) * 4;
    return vk_window(vk, m.buf, lo, hi, write, b, base, err);
}

flux_status vk_window_vec(fx_vk *vk, fx_vk_vec v, int64_t n, int write, vk_bind *b, uint32_t *base,
                          fx_err *err) {
    if (!v.buf) return vk_window(vk, NULL, 0, 0, 0, b, base, err);
    return vk_window(vk, v.buf, (uint64_t)v.off * 4, (uint64_t)(v.off + n) * 4, write, b, base, err);
}

flux_status vk_rows_per_pass(const fx_vk *vk, const char *op, const int64_t *lds, int nld, int64_t cols,
                             int64_t max_rows, int64_t *rows, fx_err *err) {
    int64_t r = max_rows;
    for (int i = 0; i < nld; i++) {
        int64_t k = vk_rows_per_window(vk, (uint64_t)lds[i] * 4, (uint64_t)cols * 4);
        if (k == 0)
            return fx_fail(err, FLUX_ERR_UNSUPPORTED,
                           "Vulkan %s: one row of %lld floats exceeds the device's binding limit of %llu bytes",
                           op, (long long)cols, (unsigned long long)vk->max_binding);
        if (k < r) r = k;
    }
    *rows = r < 1 ? 1 : r;
    return FLUX_OK;
}
