/*
 * dtype.h — every element type flux.c meets in a tensor file, in one list.
 *
 * One row per type: what kernels read (weights: F32, F16, BF16 and the ggml
 * block types with kernels), what safetensors headers may name, and the
 * other ggml types a GGUF file may hold. A row gives the type's name (as
 * safetensors and ggml spell it), its block (elements per block, 1 for
 * plain types) and bytes per block, its ggml type id (-1: none) and flags.
 * I8 is a weight too: int8 codes with the scale(s) of their file (fp8's
 * rules, src/formats/wset_quant.c). Adding a type is one row here plus, for a weight, its kernels
 * (simd/quant: the dequantizer, then the fast paths).
 *
 * Block sizes are the sizeof of ggml's block structs (ggml-common.h): e.g.
 * IQ2_XXS = f16 d + u16 qs[32] = 66 bytes per 256 elements.
 */
#ifndef FX_DTYPE_H
#define FX_DTYPE_H

/* flags */
#define FX_DT_WEIGHT      1 /* kernels read it: F32/F16/BF16 or a block type with a dequantizer */
#define FX_DT_SAFETENSORS 2 /* a safetensors header may name it */

/* X(id, name, block, bytes per block, ggml id, flags). The weight types
 * come first, in the order the kernel tables were written. */
#define FX_DTYPE_LIST(X)                                        \
    X(F32, "F32", 1, 4, 0, FX_DT_WEIGHT | FX_DT_SAFETENSORS)    \
    X(F16, "F16", 1, 2, 1, FX_DT_WEIGHT | FX_DT_SAFETENSORS)    \
    X(BF16, "BF16", 1, 2, 30, FX_DT_WEIGHT | FX_DT_SAFETENSORS) \
    X(Q8_0, "Q8_0", 32, 34, 8, FX_DT_WEIGHT)                    \
    X(Q4_0, "Q4_0", 32, 18, 2, FX_DT_WEIGHT)                    \
    X(Q4_1, "Q4_1", 32, 20, 3, FX_DT_WEIGHT)                    \
    X(Q5_0, "Q5_0", 32, 22, 6, FX_DT_WEIGHT)                    \
    X(Q5_1, "Q5_1", 32, 24, 7, FX_DT_WEIGHT)                    \
    X(Q2_K, "Q2_K", 256, 84, 10, FX_DT_WEIGHT)                  \
    X(Q3_K, "Q3_K", 256, 110, 11, FX_DT_WEIGHT)                 \
    X(Q4_K, "Q4_K", 256, 144, 12, FX_DT_WEIGHT)                 \
    X(Q5_K, "Q5_K", 256, 176, 13, FX_DT_WEIGHT)                 \
    X(Q6_K, "Q6_K", 256, 210, 14, FX_DT_WEIGHT)                 \
    X(IQ4_NL, "IQ4_NL", 32, 18, 20, FX_DT_WEIGHT)               \
    X(IQ4_XS, "IQ4_XS", 256, 136, 23, FX_DT_WEIGHT)             \
    /* plain types that are listed, never weights */            \
    X(BOOL, "BOOL", 1, 1, -1, FX_DT_SAFETENSORS)                \
    X(U8, "U8", 1, 1, -1, FX_DT_SAFETENSORS)                    \
    X(I8, "I8", 1, 1, 24, FX_DT_WEIGHT | FX_DT_SAFETENSORS) /* int8 codes, scale beside: fx_weight */ \
    X(I16, "I16", 1, 2, 25, FX_DT_SAFETENSORS)                  \
    X(U16, "U16", 1, 2, -1, FX_DT_SAFETENSORS)                  \
    X(I32, "I32", 1, 4, 26, FX_DT_SAFETENSORS)                  \
    X(U32, "U32", 1, 4, -1, FX_DT_SAFETENSORS)                  \
    X(F64, "F64", 1, 8, 28, FX_DT_SAFETENSORS)                  \
    X(I64, "I64", 1, 8, 27, FX_DT_SAFETENSORS)                  \
    X(U64, "U64", 1, 8, -1, FX_DT_SAFETENSORS)                  \
    X(F8_E4M3, "F8_E4M3", 1, 1, -1, FX_DT_WEIGHT | FX_DT_SAFETENSORS) /* per-tensor scale: fx_weight */ \
    X(F8_E5M2, "F8_E5M2", 1, 1, -1, FX_DT_WEIGHT | FX_DT_SAFETENSORS) \
    X(F8_E8M0, "F8_E8M0", 1, 1, -1, FX_DT_SAFETENSORS)          \
    X(C64, "C64", 1, 8, -1, FX_DT_SAFETENSORS)                  \
    /* ggml block types without kernels: listed, refused when read */ \
    X(Q8_1, "Q8_1", 32, 36, 9, 0)                               \
    X(Q8_K, "Q8_K", 256, 292, 15, 0)                            \
    X(IQ2_XXS, "IQ2_XXS", 256, 66, 16, 0)                       \
    X(IQ2_XS, "IQ2_XS", 256, 74, 17, 0)                         \
    X(IQ3_XXS, "IQ3_XXS", 256, 98, 18, 0)                       \
    X(IQ1_S, "IQ1_S", 256, 50, 19, 0)                           \
    X(IQ3_S, "IQ3_S", 256, 110, 21, 0)                          \
    X(IQ2_S, "IQ2_S", 256, 82, 22, 0)                           \
    X(IQ1_M, "IQ1_M", 256, 56, 29, 0)                           \
    X(TQ1_0, "TQ1_0", 256, 54, 34, 0)                           \
    X(TQ2_0, "TQ2_0", 256, 66, 35, 0)                           \
    X(MXFP4, "MXFP4", 32, 17, 39, 0)                            \
    X(NVFP4, "NVFP4", 64, 36, 40, 0)                            \
    X(Q1_0, "Q1_0", 128, 18, 41, 0)                             \
    X(Q2_0, "Q2_0", 64, 18, 42, 0)                              \
    /* E2M1 pairs packed in a byte, the even element in the high nibble: the \
     * elements of NVFP4 safetensors files (stored as U8 [n, k/2]; their     \
     * scales ride on the weight, src/formats/wset_quant.c) */            \
    X(F4_E2M1, "F4_E2M1", 2, 1, -1, FX_DT_WEIGHT)

#define FX_DTYPE_ENUM_(id, ...) FX_DTYPE_##id,
typedef enum fx_dtype { FX_DTYPE_LIST(FX_DTYPE_ENUM_) FX_DTYPE_COUNT } fx_dtype;
#undef FX_DTYPE_ENUM_

#endif
