// ipex::topk(self, k, dim=-1, largest=True, sorted=True): aten::topk's schema and results, with
// a faster kernel for the case detectors meet: the k largest of a long fp32 row, sorted (RetinaNet
// takes the top 1000 of 3.3 M class scores per image at 512x512; aten copies the row into
// (value, index) pairs and partially sorts them, 34 ms there on 2 cores). Each thread keeps a
// heap of its k best (value, index) pairs over its part of the row, reading the values in
// place; the parts' candidates are then sorted. A NaN counts as larger than any number, as in
// aten; equal values come lowest index first (aten leaves their order unspecified). Every other
// case (k * 64 > n, smallest, unsorted, another dtype, a dim that is not contiguous, autograd)
// is aten::topk itself.
#pragma once

#include <ATen/ATen.h>

#include <tuple>

namespace ipex::ops {

inline constexpr const char *kTopkOp = "ipex::topk";

std::tuple<at::Tensor, at::Tensor> topk(const at::Tensor &self, int64_t k, int64_t dim, bool largest, bool sorted);

// Whether topk() runs its own kernel for these arguments (the tests ask).
bool topk_own_kernel(const at::Tensor &self, int64_t k, int64_t dim, bool largest, bool sorted);

}  // namespace ipex::ops
