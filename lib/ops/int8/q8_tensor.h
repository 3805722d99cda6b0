// What the int8 glue ops (dequantize, the lookups, max pooling, the cat-norm op, the gates) ask
// of their arguments: a per-tensor quint8 or qint8 input, read in place when its storage is
// dense; valid output quantization parameters; a table of 256 values.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "ops/op_errors.h"

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

// `op`'s input: a per-tensor quint8/qint8 tensor (else the caller's error), made dense.
inline at::Tensor dense_q8_input(const at::Tensor &input, const char *op) {
    IPEX_CHECK_INPUT(is_q8_per_tensor(input), op,
                     ": the input must be a quint8 or qint8 per-tensor quantized tensor (got ", input.toString(), ")");
    return dense(input);
}

// `op`'s output type and quantization parameters: quint8 or qint8, a finite positive scale, a
// zero point in the type's range.
inline void check_q8_output(double scale, int64_t zero_point, at::ScalarType dtype, const char *op) {
    IPEX_CHECK_INPUT(dtype == at::kQUInt8 || dtype == at::kQInt8, op, ": dtype must be quint8 or qint8 (got ", dtype,
                     ")");
    const int64_t qmin = dtype == at::kQInt8 ? -128 : 0;
    IPEX_CHECK_INPUT(std::isfinite(scale) && scale > 0 && zero_point >= qmin && zero_point <= qmin + 255, op,
                     ": scale ", scale, " / zero point ", zero_point, " are not valid for ", dtype);
}

// `op`'s lookup table: 256 values of `type`.
inline void check_table(const at::Tensor &table, at::ScalarType type, const char *op) {
    IPEX_CHECK_INPUT(table.dim() == 1 && table.numel() == 256 && table.scalar_type() == type && !table.is_quantized(),
                     op, ": the table must hold 256 ", c10::toString(type), " values (got ", table.toString(), " ",
                     table.sizes(), ")");
}

// An fp32 table's 256 values as the 32-bit words the lookup kernels take.
inline std::vector<int32_t> table_words(const at::Tensor &table, const char *op) {
    check_table(table, at::kFloat, op);
    std::vector<int32_t> words(256);
    std::memcpy(words.data(), table.contiguous().data_ptr<float>(), 256 * sizeof(float));
    return words;
}

}  // namespace ipex::quant
