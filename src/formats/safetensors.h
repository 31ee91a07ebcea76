/*
 * safetensors.h — the safetensors reader of the tensor-file layer
 * (tensor_file.h opens files; this is the format).
 *
 * File format: 8-byte little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [b, e]},
 *    ..., "__metadata__": {"key": "value", ...}}
 * then the data section; [b, e) are byte offsets into the data section.
 *
 * Opening validates the header strictly (every error names the file and,
 * where there is one, the tensor): length bounds (1 byte .. 100 MB, inside
 * the file), well-formed JSON object, every entry an object with a known
 * dtype (the full safetensors list), a shape of at most FX_ST_MAX_DIMS
 * non-negative integers, shape × element size without overflow and equal to
 * e − b, 0 <= b <= e <= data size, no two tensors overlapping, no duplicate
 * names, __metadata__ an object of strings (fx_tensor_file_metadata answers from
 * it). Gaps between tensors are allowed. Opening touches only the header.
 *
 * Only F32, F16, BF16 and fp8 (F8_E4M3, F8_E5M2, with their per-tensor scale:
 * weight_set.h) tensors can be used as weights; other dtypes (e.g.
 * the VAE's I64 bn.num_batches_tracked) are listed and validated but
 * refused by the weight getters.
 */
#ifndef FX_SAFETENSORS_H
#define FX_SAFETENSORS_H

#include "tensor_file.h"

#define FX_ST_MAX_HEADER (100u * 1000u * 1000u) /* 100 MB, as the reference library */

#endif
