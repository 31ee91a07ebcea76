/*
 * vk_internal.h — what the files of the Vulkan backend share (never
 * included outside src/vulkan): the loader's function table, the context
 * and buffer structs, pipelines, and the dispatch recorder.
 *
 * Function pointers come from vkGetInstanceProcAddr / vkGetDeviceProcAddr
 * of a loader opened with dlopen, and live in the context: no prototypes,
 * no global state.
 */
#ifndef FX_VK_INTERNAL_H
#define FX_VK_INTERNAL_H

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "vk.h"

/* ------------------------------------------------------------------------ */
/* The function table                                                       */
/* ------------------------------------------------------------------------ */

#define VK_GLOBAL_FNS(X)                                                       \
    X(vkCreateInstance)                                                        \
    X(vkEnumerateInstanceLayerProperties)                                      \
    X(vkEnumerateInstanceExtensionProperties)

#define VK_INSTANCE_FNS(X)                                                     \
    X(vkDestroyInstance)                                                       \
    X(vkEnumeratePhysicalDevices)                                              \
    X(vkGetPhysicalDeviceProperties)                                           \
    X(vkGetPhysicalDeviceProperties2)                                          \
    X(vkGetPhysicalDeviceFeatures2)                                            \
    X(vkGetPhysicalDeviceMemoryProperties)                                     \
    X(vkGetPhysicalDeviceQueueFamilyProperties)                                \
    X(vkEnumerateDeviceExtensionProperties)                                    \
    X(vkCreateDevice)                                                          \
    X(vkGetDeviceProcAddr)

#define VK_DEVICE_FNS(X)                                                       \
    X(vkDestroyDevice)                                                         \
    X(vkGetDeviceQueue)                                                        \
    X(vkDeviceWaitIdle)                                                        \
    X(vkCreateBuffer)                                                          \
    X(vkDestroyBuffer)                                                         \
    X(vkGetBufferMemoryRequirements)                                           \
    X(vkAllocateMemory)                                                        \
    X(vkFreeMemory)                                                            \
    X(vkBindBufferMemory)                                                      \
    X(vkMapMemory)                                                             \
    X(vkUnmapMemory)                                                           \
    X(vkCreateShaderModule)                                                    \
    X(vkDestroyShaderModule)                                                   \
    X(vkCreateDescriptorSetLayout)                                             \
    X(vkDestroyDescriptorSetLayout)                                            \
    X(vkCreatePipelineLayout)                                                  \
    X(vkDestroyPipelineLayout)                                                 \
    X(vkCreateComputePipelines)                                                \
    X(vkDestroyPipeline)                                                       \
    X(vkCreateDescriptorPool)                                                  \
    X(vkDestroyDescriptorPool)                                                 \
    X(vkResetDescriptorPool)                                                   \
    X(vkAllocateDescriptorSets)                                                \
    X(vkUpdateDescriptorSets)                                                  \
    X(vkCreateCommandPool)                                                     \
    X(vkDestroyCommandPool)                                                    \
    X(vkAllocateCommandBuffers)                                                \
    X(vkBeginCommandBuffer)                                                    \
    X(vkEndCommandBuffer)                                                      \
    X(vkResetCommandBuffer)                                                    \
    X(vkCmdBindPipeline)                                                       \
    X(vkCmdBindDescriptorSets)                                                 \
    X(vkCmdPushConstants)                                                      \
    X(vkCmdDispatch)                                                           \
    X(vkCmdPipelineBarrier)                                                    \
    X(vkCmdCopyBuffer)                                                         \
    X(vkCreateFence)                                                           \
    X(vkDestroyFence)                                                          \
    X(vkResetFences)                                                           \
    X(vkWaitForFences)                                                         \
    X(vkQueueSubmit)

typedef struct vk_fns {
    PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
#define VK_FN_FIELD(name) PFN_##name name;
    VK_GLOBAL_FNS(VK_FN_FIELD)
    VK_INSTANCE_FNS(VK_FN_FIELD)
    VK_DEVICE_FNS(VK_FN_FIELD)
#undef VK_FN_FIELD
    PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;   /* optional */
    PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT; /* optional */
} vk_fns;

/* An instance with its loader (vk_instance.c). */
typedef struct vk_instance {
    void *lib;
    vk_fns f;
    VkInstance inst;
    VkDebugUtilsMessengerEXT messenger;
} vk_instance;

/* ------------------------------------------------------------------------ */
/* Shaders and pipelines                                                    */
/* ------------------------------------------------------------------------ */

typedef enum vk_shader_id {
#define X(name) VK_SH_##name,
#include "vk_shader_list.h"
#undef X
    VK_SH_COUNT
} vk_shader_id;

/* SPIR-V words of a shader and its name (vk_shaders.c). */
const uint32_t *vk_shader_code(vk_shader_id id, size_t *bytes);
const char *vk_shader_name(vk_shader_id id);

enum { VK_MAX_SPEC = 10, VK_MAX_BINDINGS = 8, VK_PUSH_MAX = 128 };

typedef struct vk_pipeline {
    vk_shader_id shader;
    int nspec;
    uint32_t spec[VK_MAX_SPEC];
    int nbind;
    uint32_t push_bytes;
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkPipeline pipe;
} vk_pipeline;

/* The pipeline of (shader, specialization constants 0..nspec-1), created
 * on first use and cached in the context. */
flux_status vk_pipeline_get(fx_vk *vk, vk_shader_id sh, int nbind, uint32_t push_bytes,
                            const uint32_t *spec, int nspec, const vk_pipeline **out, fx_err *err);
void vk_pipelines_destroy(fx_vk *vk);

/* ------------------------------------------------------------------------ */
/* Context and buffers                                                      */
/* ------------------------------------------------------------------------ */

struct fx_vk_buf {
    VkBuffer buf;
    VkDeviceMemory mem;
    uint64_t bytes;
    void *map; /* persistently mapped (unified memory), else NULL */
    char what[64];
};

typedef struct vk_range {
    VkBuffer buf;
    uint64_t lo, hi;
} vk_range;

enum { VK_MAX_PIPELINES = 128, VK_DESC_POOL_SETS = 512 };

struct fx_vk {
    vk_instance in;
    vk_fns f; /* = in.f plus the device functions */
    VkPhysicalDevice phys;
    VkDevice dev;
    VkQueue queue;
    uint32_t queue_family;
    fx_vk_device_info info;
    fx_vk_opts opts;
    uint64_t max_binding; /* effective binding window, bytes */
    uint64_t timeout_ns;

    VkPhysicalDeviceMemoryProperties mem;
    int device_mapped;   /* device buffers live in mapped host-visible memory */

    vk_pipeline pipes[VK_MAX_PIPELINES];
    int npipes;

    /* the recorder */
    VkCommandPool cmd_pool;
    VkCommandBuffer cmd;
    VkFence fence;
    int recording;
    int64_t dispatches; /* recorded since the last submit */
    uint64_t dispatch_total;
    VkDescriptorPool *pools;
    int npools, pool_cur;
    vk_range *hz_write, *hz_read; /* ranges written / read since the last barrier */
    int nhz_write, nhz_read, cap_write, cap_read;
    fx_vk_buf **deferred;         /* freed after the next submit completes */
    int ndeferred, cap_deferred;

    fx_vk_buf *staging;  /* host-visible copy buffer (non-unified memory) */
    fx_vk_buf *dummy;    /* bound where an optional operand is absent */
    fx_vk_buf *scratch;  /* per-op temporaries (group-norm partials, stats) */

    /* weights (vk_weights.c): every registered weight, the bytes of those
     * resident, the budget they share, a use counter for the eviction order */
    struct vk_resident *weights;
    uint64_t weight_bytes, weight_budget, use_tick;
    fx_vk_weight_stats wstats;
    int told_streaming;
    uint64_t allocated;  /* bytes of every live buffer (opts.memory_limit) */

    int lost;            /* device lost or timed out: every call fails with lost_msg */
    char lost_msg[FX_ERR_MSG_MAX];
    int inject_lost;
    int validation_errors;
    char validation_first[512];
};

/* Tile and workgroup sizes for a CPU device (lavapipe: small workgroups, no
 * shared-memory GEMM), unless opts.gpu_tuning asks for the GPU ones. */
static inline int vk_cpu_tuned(const fx_vk *vk) {
    return vk->info.type == FX_VK_DEV_CPU && !vk->opts.gpu_tuning;
}

/* Instance level (vk_instance.c): open the loader and make an instance
 * (with validation and a messenger counting into *vk_for_messages). */
flux_status vk_instance_create(vk_instance *in, const fx_vk_opts *o, fx_vk *vk_for_messages,
                               fx_err *err);
void vk_instance_destroy(vk_instance *in);
/* Device facts for the list / selection (vk_device.c). */
void vk_device_query(const vk_instance *in, VkPhysicalDevice pd, int index, fx_vk_device_info *info);

/* Error state (vk_status.c, the bottom of src/vulkan: calls nothing here).
 * "VK_ERROR_OUT_OF_DEVICE_MEMORY", ... */
const char *vk_result_name(VkResult r);
/* Error for a failed call; device lost marks the context lost. */
flux_status vk_fail(fx_vk *vk, fx_err *err, VkResult r, const char *what);
/* FLUX_OK, or the lost-device error. */
flux_status vk_check_alive(const fx_vk *vk, fx_err *err);

/* Weight layout on the device (vk.h fx_vk_weight). GGUF block types the
 * GEMM shaders dequantize as they load (WTYPE 3..14 of gemm_common.glsl):
 * every block type the CPU reads. fp8 (WTYPE 15, 16) is dense: one byte an
 * element, decoded and scaled as the GEMM loads. */
/* The GGUF block types (ggml's, the device's block shaders read them as
 * stored); NVFP4's F4_E2M1 pairs are not among them (refused at upload). */
static inline int vk_w_blocks(fx_dtype t) {
    return fx_dtype_is_weight(t) && fx_dtype_is_block(t) && fx_dtype_ggml_id(t) >= 0;
}
static inline size_t vk_dtype_bytes(fx_dtype t) { return t == FX_DTYPE_F32 ? 4 : fx_dtype_is_fp8(t) ? 1 : 2; }
/* Bytes from one weight row to the next: block rows are ld bytes apart,
 * dense rows ld elements. */
static inline uint64_t vk_w_row_bytes(const fx_vk_weight *w) {
    return vk_w_blocks(w->dtype) ? (uint64_t)w->ld : (uint64_t)w->ld * vk_dtype_bytes(w->dtype);
}
/* Byte offset of weight row r on the device. */
static inline uint64_t vk_w_row_at(const fx_vk_weight *w, int64_t r) {
    return vk_w_blocks(w->dtype) ? (uint64_t)(w->off + r * w->ld)
                                 : (uint64_t)(w->off + r * w->ld) * vk_dtype_bytes(w->dtype);
}
/* Weights (vk_weights.c): make w resident before recording a use of it
 * (an evicted weight is uploaded again, others evicted to make room). */
flux_status vk_weight_use(fx_vk *vk, const fx_vk_weight *w, fx_err *err);
/* Forget every weight record (context teardown). */
void vk_weights_destroy(fx_vk *vk);

/* Buffers (vk_buffer.c; calls only vk_status.c). host: 1 = a mapped
 * staging buffer, 0 = a device buffer. */
flux_status vk_buf_create(fx_vk *vk, uint64_t bytes, const char *what, int host, fx_vk_buf **out,
                          fx_err *err);
void vk_buf_destroy(fx_vk *vk, fx_vk_buf *b);

/* Memory: the dummy/staging/scratch buffers and host transfers
 * (vk_memory.c; above the recorder, whose copies it submits). */
flux_status vk_memory_init(fx_vk *vk, fx_err *err);
void vk_memory_destroy(fx_vk *vk);
/* The scratch buffer with at least `bytes` (old one freed after the next submit). */
flux_status vk_scratch(fx_vk *vk, uint64_t bytes, fx_vk_buf **out, fx_err *err);

/* ------------------------------------------------------------------------ */
/* The recorder (vk_recorder.c; calls vk_buffer.c and vk_status.c only)    */
/* ------------------------------------------------------------------------ */

/* One storage-buffer binding: bytes [off, off + range) of buf. */
typedef struct vk_bind {
    const fx_vk_buf *buf;
    uint64_t off, range;
    int write;
} vk_bind;

flux_status vk_recorder_init(fx_vk *vk, fx_err *err);
void vk_recorder_destroy(fx_vk *vk);

/* The binding window covering bytes [lo, hi) of buf (lo a multiple of 4):
 * its start is aligned down to the device's offset alignment and *base is
 * lo's 32-bit word index inside the window. FLUX_ERR_UNSUPPORTED if the
 * window exceeds the binding limit. Absent (buf NULL) binds the dummy. */
flux_status vk_window(fx_vk *vk, const fx_vk_buf *buf, uint64_t lo, uint64_t hi, int write,
                      vk_bind *b, uint32_t *base, fx_err *err);
/* Rows of `row_bytes` at `ld_bytes` apart that one window holds (>= 0). */
int64_t vk_rows_per_window(const fx_vk *vk, uint64_t ld_bytes, uint64_t row_bytes);

/* Record one dispatch (barrier first if it depends on earlier ones). */
flux_status vk_dispatch(fx_vk *vk, const vk_pipeline *p, const vk_bind *b, const void *push,
                        uint32_t gx, uint32_t gy, uint32_t gz, fx_err *err);
/* Begin recording if not yet (copies use it too). */
flux_status vk_begin(fx_vk *vk, fx_err *err);
/* Record a buffer-to-buffer copy of regions, with barriers on both sides. */
flux_status vk_copy_regions(fx_vk *vk, const fx_vk_buf *src, const fx_vk_buf *dst, const VkBufferCopy *regions,
                            uint32_t n, fx_err *err);
/* Submit what is recorded and wait for it (no-op when nothing is). */
flux_status vk_submit_wait(fx_vk *vk, fx_err *err);
/* Free b after the next submit (now if nothing is recorded). */
void vk_defer_free(fx_vk *vk, fx_vk_buf *b);

/* ------------------------------------------------------------------------ */
/* Shared argument checks (vk_ops_common in vk_recorder.c)                  */
/* ------------------------------------------------------------------------ */

/* The view [rows, cols] of m fits its buffer (ld >= cols, offsets >= 0). */
flux_status vk_check_mat(const char *op, const char *name, fx_vk_mat m, int64_t rows, int64_t cols,
                         fx_err *err);
/* n floats at v fit its buffer (absent is fine when optional). */
flux_status vk_check_vec(const char *op, const char *name, fx_vk_vec v, int64_t n, int optional,
                         fx_err *err);
/* Window over rows [r0, r0 + nr) of a view of cols columns. */
flux_status vk_window_rows(fx_vk *vk, fx_vk_mat m, int64_t r0, int64_t nr, int64_t cols, int write,
                           vk_bind *b, uint32_t *base, fx_err *err);
/* Window over n floats of a vector (absent binds the dummy, base 0). */
flux_status vk_window_vec(fx_vk *vk, fx_vk_vec v, int64_t n, int write, vk_bind *b, uint32_t *base,
                          fx_err *err);
/* Rows per dispatch for views with the given lds (all cols wide), also
 * bounded by max_rows; FLUX_ERR_UNSUPPORTED if one row does not fit. */
flux_status vk_rows_per_pass(const fx_vk *vk, const char *op, const int64_t *lds, int nld,
                             int64_t cols, int64_t max_rows, int64_t *rows, fx_err *err);

#endif
