/*
 * vk.h — the Vulkan compute backend (built with `make VULKAN=1`).
 *
 * The device-side twin of simd/kernels.h: the same operations, on tensors
 * that live in device buffers. A backend context (fx_vk) owns everything:
 * the loader (opened at run time, so a VULKAN=1 binary still runs where no
 * Vulkan is installed), the instance, one device and compute queue, the
 * pipelines, one command buffer that records operations, and the buffers.
 *
 * Execution model
 *  - Every fx_vk_<op> call checks its arguments and RECORDS one or more
 *    dispatches (barriers only where a dispatch touches a range an earlier
 *    one wrote or read); nothing runs until fx_vk_sync, fx_vk_download or
 *    fx_vk_upload, which submit the whole recording once and wait on one
 *    fence (with a time limit).
 *  - Uploads and downloads are synchronous and see every recorded op.
 *  - Activations are f32, row-major, with a leading dimension (fx_vk_mat),
 *    exactly as kernels.h. Weights are uploaded once (again only when they
 *    exceed the device budget: fx_vk_weight below), as stored (bf16 read
 *    in shaders as packed uint pairs, f16 through unpackHalf2x16, f32,
 *    GGUF blocks and fp8 bytes decoded in the GEMM), rows padded to 16
 *    bytes (fx_vk_weight).
 *  - A binding never exceeds maxStorageBufferRange (128 MiB on lavapipe):
 *    operations over larger tensors are split into several dispatches over
 *    row ranges, each binding its own window of the buffers.
 *  - Errors: every fallible call returns a flux_status with the message in
 *    err (no loader, no device, out of device memory naming the size, a lost
 *    device or a time-out: after those the context only reports the error).
 *
 * Accumulation is f32 everywhere; tolerances against the CPU scalar
 * reference are stated in tests/vulkan.
 */
#ifndef FX_VK_H
#define FX_VK_H

#include <stddef.h>
#include <stdint.h>

#include "simd/kernels.h"
#include "src/base/log.h"

typedef struct fx_vk fx_vk;         /* backend context */
typedef struct fx_vk_buf fx_vk_buf; /* one device buffer */

/* ------------------------------------------------------------------------ */
/* Devices and the context                                                  */
/* ------------------------------------------------------------------------ */

enum {
    FX_VK_DEVICE_AUTO = -1, /* best GPU: discrete > integrated > virtual; never a CPU device */
    FX_VK_DEVICE_ANY = -2   /* the same, but a CPU device (lavapipe) is acceptable */
};

typedef enum fx_vk_gemm_variant {
    FX_VK_GEMM_AUTO = 0, /* register-blocked on CPU devices, shared-memory tiles on GPUs */
    FX_VK_GEMM_REG,      /* register blocking, no shared memory */
    FX_VK_GEMM_TILED     /* shared-memory tiles + register blocking */
} fx_vk_gemm_variant;

typedef struct fx_vk_opts {
    int device;                 /* FX_VK_DEVICE_AUTO, FX_VK_DEVICE_ANY, or an index */
    int validation;             /* enable VK_LAYER_KHRONOS_validation (error if absent) */
    const char *loader;         /* loader library; NULL = "libvulkan.so.1" */
    uint64_t max_binding_bytes; /* 0 = device limit; smaller forces splitting (tests) */
    int force_staging;          /* copy through a staging buffer even on mappable memory */
    double timeout_s;           /* limit of one wait for the device; 0 = 60 s */
    fx_vk_gemm_variant gemm;
    int gpu_tuning;             /* GPU tile and workgroup sizes even on a CPU device (tests) */
    uint64_t weight_budget;     /* device bytes registered weights may occupy; 0 = 85% of
                                   the device's memory (fx_vk_weight_register) */
    uint64_t memory_limit;      /* device bytes the context may allocate; 0 = what the
                                   driver gives; smaller fails allocations as a full
                                   device does (tests) */
    const fx_logger *log;       /* -v lines; NULL = silent */
} fx_vk_opts;

void fx_vk_opts_init(fx_vk_opts *o);

/* Same values as VkPhysicalDeviceType. */
typedef enum fx_vk_device_type {
    FX_VK_DEV_OTHER = 0,
    FX_VK_DEV_INTEGRATED,
    FX_VK_DEV_DISCRETE,
    FX_VK_DEV_VIRTUAL,
    FX_VK_DEV_CPU
} fx_vk_device_type;

/* "discrete GPU", "CPU", ... */
const char *fx_vk_device_type_name(fx_vk_device_type t);

typedef struct fx_vk_device_info {
    int index;                  /* position in the loader's enumeration (--device N) */
    fx_vk_device_type type;
    char name[256];             /* "llvmpipe (LLVM 15.0.6, 256 bits)" */
    char driver[256];           /* "llvmpipe, Mesa 22.3.6 (LLVM 15.0.6)" */
    uint32_t api_version;       /* VK_MAKE_API_VERSION */
    uint64_t device_memory;     /* largest device-local heap, bytes */
    uint64_t max_binding;       /* maxStorageBufferRange */
    uint64_t max_allocation;    /* maxMemoryAllocationSize */
    uint64_t max_buffer;        /* maxBufferSize (maintenance4), else max_allocation */
    uint32_t binding_align;     /* minStorageBufferOffsetAlignment */
    uint32_t subgroup_size;
    uint32_t shared_memory;     /* maxComputeSharedMemorySize */
    uint32_t max_invocations;   /* maxComputeWorkGroupInvocations */
    int unified_memory;         /* device-local memory is host-visible (no staging) */
    int float16;                /* shaderFloat16 and 16-bit storage buffers */
    int coopmat;                /* VK_KHR_cooperative_matrix present */
    int usable;                 /* 1, or 0 with the reason in why_not */
    char why_not[160];
} fx_vk_device_info;

/* Every physical device the loader sees, in its order: up to max entries in
 * out, the total in *count. No loader or no driver is an error (message in
 * err), zero devices is not. */
flux_status fx_vk_list_devices(const fx_vk_opts *o, fx_vk_device_info *out, int max, int *count,
                               fx_err *err);

/* A context on the device o->device. FLUX_ERR_UNSUPPORTED when there is no
 * loader, no (suitable) device, or auto finds only CPU devices. */
flux_status fx_vk_open(const fx_vk_opts *o, fx_vk **out, fx_err *err);
/* Waits for recorded work (errors ignored), frees everything. NULL is fine. */
void fx_vk_close(fx_vk *vk);

const fx_vk_device_info *fx_vk_device(const fx_vk *vk);
/* One line for -v: "<name> (<type>), driver <driver>, Vulkan x.y.z, ..." */
size_t fx_vk_describe(const fx_vk *vk, char *buf, size_t size);

/* Validation-layer messages of severity error seen so far (and the first). */
int fx_vk_validation_errors(const fx_vk *vk, const char **first);

/* Dispatches recorded since the context was opened (tests: passes). */
uint64_t fx_vk_dispatch_count(const fx_vk *vk);

/* Test hook: make the next submit fail as a lost device would. */
void fx_vk_inject_device_lost(fx_vk *vk);

/* ------------------------------------------------------------------------ */
/* Buffers, transfers, synchronisation                                      */
/* ------------------------------------------------------------------------ */

/* A device buffer of `bytes` (what names it in errors). Out of memory, or
 * over the device's allocation limit: FLUX_ERR_NOMEM naming the size. */
flux_status fx_vk_buf_new(fx_vk *vk, uint64_t bytes, const char *what, fx_vk_buf **out,
                          fx_err *err);
/* Freed once recorded work that uses it has run. NULL is fine. */
void fx_vk_buf_free(fx_vk *vk, fx_vk_buf *b);
uint64_t fx_vk_buf_bytes(const fx_vk_buf *b);

/* Host ↔ device copies of [offset, offset + bytes); they first run all
 * recorded work. */
flux_status fx_vk_upload(fx_vk *vk, fx_vk_buf *dst, uint64_t offset, const void *src,
                         uint64_t bytes, fx_err *err);
flux_status fx_vk_download(fx_vk *vk, const fx_vk_buf *src, uint64_t offset, void *dst,
                           uint64_t bytes, fx_err *err);
/* Submit everything recorded and wait for it. */
flux_status fx_vk_sync(fx_vk *vk, fx_err *err);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                  */
/* ------------------------------------------------------------------------ */

/* f32 matrix view: element (r, c) at float index off + r·ld + c of buf. */
typedef struct fx_vk_mat {
    fx_vk_buf *buf;
    int64_t off, ld;
} fx_vk_mat;

/* f32 vector (or contiguous tensor) at float index off; buf NULL = absent. */
typedef struct fx_vk_vec {
    fx_vk_buf *buf;
    int64_t off;
} fx_vk_vec;

/* A weight on the device: [n, k] as stored (dtype kept), rows ld elements
 * apart (k rounded up to 16 bytes, zero-filled), starting at element off.
 * GGUF block types (all twelve the CPU reads; linear weights only) keep
 * their blocks as stored, dequantized inside the GEMM: rows are then ld
 * BYTES apart (back to back, fx_dtype_row_bytes(dtype, k)), off in bytes.
 * fp8 (F8_E4M3, F8_E5M2; linear weights only) stays one byte an element,
 * rows padded to 16 bytes, and the GEMM loads f32(fp8)·scale, the CPU's
 * value (one f32 rounding): never a wider copy on the host or the device.
 *
 * Residency. Weights share a device budget (fx_vk_opts.weight_budget).
 * fx_vk_weight_upload copies a weight to the device for its whole life.
 * fx_vk_weight_register keeps the host view instead (its data must outlive
 * the device weight, as the CPU backend needs it to) and uploads it while it
 * fits the budget; a weight that does not fit is uploaded at its next use,
 * evicting others: first those idle since that weight's previous use (an
 * earlier stage's), oldest first; then, inside a loop over more weights
 * than fit (the transformer's blocks, every step), the most recently used
 * one, which the loop needs again last — so a loop streams only the bytes
 * that exceed the budget, not all of them. Results do not depend on the
 * budget (same shaders, same data). buf is NULL while evicted. */
typedef struct fx_vk_weight {
    fx_vk_buf *buf;
    fx_dtype dtype;
    int64_t n, k, ld, off;
    struct vk_resident *res; /* its residency record (vk_weights.c) */
    float scale;             /* fp8: the per-tensor scale (kernels.h fx_weight; 0 = 1) */
} fx_vk_weight;

/* Upload a linear weight (any ld on the host), resident until freed. */
flux_status fx_vk_weight_upload(fx_vk *vk, const fx_weight *w, const char *name,
                                fx_vk_weight *out, fx_err *err);
/* Upload a conv weight stored [cout, cin, kh, kw], reordered to
 * [cout, kh, kw, cin] (k = kh·kw·cin) for the implicit GEMM. */
flux_status fx_vk_conv_weight_upload(fx_vk *vk, const fx_conv2d_geom *g, const fx_weight *w,
                                     const char *name, fx_vk_weight *out, fx_err *err);
/* The same, kept within the weight budget (see above); g NULL = linear.
 * *out must stay at its address until fx_vk_weight_free. */
flux_status fx_vk_weight_register(fx_vk *vk, const fx_conv2d_geom *g, const fx_weight *w, const char *name,
                                  fx_vk_weight *out, fx_err *err);
void fx_vk_weight_free(fx_vk *vk, fx_vk_weight *w);

typedef struct fx_vk_weight_stats {
    uint64_t budget;          /* bytes */
    uint64_t registered;      /* bytes of every weight on the context */
    uint64_t resident;        /* bytes on the device now */
    uint64_t peak_resident;
    uint64_t uploads;         /* weight uploads after registration (streaming) */
    uint64_t upload_bytes;
    uint64_t evictions;
    uint64_t allocated;       /* bytes of every device buffer of the context */
} fx_vk_weight_stats;

fx_vk_weight_stats fx_vk_weights(const fx_vk *vk);

/* fx_vk_buf_new for activations: when the device is out of memory,
 * registered weights give way (least recently used first, after the
 * recorded work has run; uploaded again at their next use) until the
 * buffer fits or none is left to evict. */
flux_status fx_vk_buf_new_evicting(fx_vk *vk, uint64_t bytes, const char *what, fx_vk_buf **out, fx_err *err);

/* RoPE cos/sin table on the device: cos [seq, rot_dim/2] then sin. */
typedef struct fx_vk_rope {
    fx_vk_buf *buf;
    int64_t seq;
    int rot_dim;
    fx_rope_layout layout;
} fx_vk_rope;

flux_status fx_vk_rope_upload(fx_vk *vk, const fx_rope_table *t, fx_vk_rope *out, fx_err *err);
void fx_vk_rope_free(fx_vk *vk, fx_vk_rope *r);

/* Record a device-side copy of [rows, cols] between f32 views (which must
 * not overlap). */
flux_status fx_vk_copy(fx_vk *vk, int64_t rows, int64_t cols, fx_vk_mat src, fx_vk_mat dst, fx_err *err);

/* ------------------------------------------------------------------------ */
/* Operations (recorded; semantics as the kernels.h function of that name)  */
/* ------------------------------------------------------------------------ */

typedef struct fx_vk_epilogue {
    fx_epilogue_mode mode;
    fx_vk_vec bias; /* [n] or absent */
    fx_vk_vec gate; /* [n], FX_EPI_GATED_ACCUMULATE */
    /* Gated accumulate adds (gate_scale·gate[j])·t, the gate of an adapter
     * term (kernels.h fx_delta: g = s·gate); 0 means 1 (the plain layer). */
    float gate_scale;
} fx_vk_epilogue;

/* Y[m, n] (op)= X[m, k] · W[n, k]ᵀ (+ bias); epi NULL = store. */
flux_status fx_vk_linear(fx_vk *vk, int64_t m, fx_vk_mat x, const fx_vk_weight *w, fx_vk_mat y,
                         const fx_vk_epilogue *epi, fx_err *err);

/* x [h, w, cin] → y [ho, wo, cout] (contiguous), w from
 * fx_vk_conv_weight_upload; padding, stride, nearest ×2 upsampling. */
flux_status fx_vk_conv2d(fx_vk *vk, const fx_conv2d_geom *g, fx_vk_vec x, const fx_vk_weight *w,
                         const fx_vk_epilogue *epi, fx_vk_vec y, fx_err *err);

typedef struct fx_vk_attn_args {
    int64_t sq, sk;
    int hq, hkv, d;
    fx_vk_mat q, k, v, o; /* o may be q exactly */
    float scale;
    int causal;
    int64_t causal_offset;
    fx_vk_buf *key_mask;  /* [sk] bytes at byte key_mask_off (multiple of 4); NULL = all keys */
    int64_t key_mask_off;
} fx_vk_attn_args;

flux_status fx_vk_attention(fx_vk *vk, const fx_vk_attn_args *a, fx_err *err);

/* In place on x [rows, heads·head_dim]: per-head RMSNorm (norm_w absent =
 * none), then RoPE with table rows rope_row0.. (rope NULL = none). */
flux_status fx_vk_qk_norm_rope(fx_vk *vk, fx_vk_mat x, int64_t rows, int heads, int head_dim,
                               fx_vk_vec norm_w, float eps, const fx_vk_rope *rope,
                               int64_t rope_row0, fx_err *err);

flux_status fx_vk_rmsnorm(fx_vk *vk, int64_t rows, int64_t cols, fx_vk_mat x, fx_vk_vec w,
                          float eps, fx_vk_mat y, fx_err *err);
flux_status fx_vk_layernorm_modulate(fx_vk *vk, int64_t rows, int64_t cols, fx_vk_mat x,
                                     fx_vk_vec shift, fx_vk_vec scale, float eps, fx_vk_mat y,
                                     fx_err *err);
flux_status fx_vk_silu(fx_vk *vk, int64_t n, fx_vk_vec x, fx_err *err);
flux_status fx_vk_swiglu(fx_vk *vk, int64_t rows, int64_t cols, fx_vk_mat gate, fx_vk_mat up,
                         fx_vk_mat out, fx_err *err);
flux_status fx_vk_gated_add(fx_vk *vk, int64_t rows, int64_t cols, fx_vk_mat y, fx_vk_vec gate,
                            fx_vk_mat x, fx_err *err);
flux_status fx_vk_softmax_rows(fx_vk *vk, int64_t rows, int64_t cols, fx_vk_mat x, fx_err *err);

/* The reorderings of a Kronecker (LoKr) adapter term (vk_kron.c): for each
 * of `tokens` rows t and j < cols, with o = skip + j,
 *   v = src[t·src_ld + (o mod p)·q + o / p]   (src rows hold p·q floats)
 * stored to dst[t, j] (epi NULL or store), or added as a term is:
 * dst[t, j] += (gate_scale·gate[j])·v (epi gated accumulate). */
flux_status fx_vk_kron_gather(fx_vk *vk, int64_t tokens, int64_t cols, fx_vk_vec src, int64_t src_ld,
                              int64_t skip, int64_t p, int64_t q, fx_vk_mat dst,
                              const fx_vk_epilogue *epi, fx_err *err);

/* GroupNorm over x [pixels, channels]: stats [2·groups] = mean[groups]
 * then rstd[groups]; apply as fx_groupnorm_apply (gamma/beta absent = 1/0). */
flux_status fx_vk_groupnorm_stats(fx_vk *vk, int64_t pixels, int channels, int groups,
                                  fx_vk_vec x, float eps, fx_vk_vec stats, fx_err *err);
flux_status fx_vk_groupnorm_apply(fx_vk *vk, int64_t pixels, int channels, int groups,
                                  fx_vk_vec x, fx_vk_vec stats, fx_vk_vec gamma, fx_vk_vec beta,
                                  int fuse_silu, fx_vk_vec y, fx_err *err);
flux_status fx_vk_groupnorm(fx_vk *vk, int64_t pixels, int channels, int groups, fx_vk_vec x,
                            fx_vk_vec gamma, fx_vk_vec beta, float eps, int fuse_silu,
                            fx_vk_vec y, fx_err *err);

/* n elements from (src, src_off, src_type) to (dst, dst_off, dst_type),
 * offsets in elements (even for 16-bit types); f32 ↔ bf16 / f16, exact
 * widening, round-to-nearest-even narrowing (bit-identical to float16.h). */
flux_status fx_vk_convert(fx_vk *vk, int64_t n, fx_vk_buf *src, int64_t src_off, fx_dtype src_type,
                          fx_vk_buf *dst, int64_t dst_off, fx_dtype dst_type, fx_err *err);

#endif
