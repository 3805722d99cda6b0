// What the int8 glue ops (dequantize, the lookups, max pooling, the cat-norm op) ask of a
// tensor: a per-tensor quint8 or qint8 one, read in place when its storage is dense.
#pragma once

#include <ATen/ATen.h>

namespace ipex::quant {

inline bool is_q8_per_tensor(const at::Tensor &t) {
    return t.is_quantized() && t.qscheme() == at::kPerTensorAffine &&
           (t.scalar_type() == at::kQUInt8 || t.scalar_type() == at::kQInt8);
}

// t itself when dense (any order of dims, no gaps or overlaps: element i of its storage is
// the i-th value read), else a copy in its suggested memory format.
inline at::Tensor dense(const at::Tensor &t) {
    return t.is_non_overlapping_and_dense() ? t : t.contiguous(t.suggest_memory_format());
}

}  // namespace ipex::quant
