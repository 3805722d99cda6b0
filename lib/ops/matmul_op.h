// ipex::matmul: aten::matmul of two activations on oneDNN's matmul primitive, in the inputs'
// dtype (fp32, or bf16 accumulating in fp32), batch dims broadcast as aten does, any strides
// (a layout oneDNN would only run with its reference code is copied to a dense one first).
// Ranks below 2, mixed or other dtypes and empty tensors go to at::matmul. Primitives live in
// one process-wide cache keyed on shapes, strides and dtype.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>

namespace ipex::ops {

at::Tensor matmul(const at::Tensor &self, const at::Tensor &other);

// Entries of the process-wide matmul primitive cache (tests).
size_t matmul_cached_primitives();

}  // namespace ipex::ops
