// ipex::contiguous(self): aten::contiguous(self) (the standard layout; self itself when it is
// already contiguous), with a faster copy for the case the optimized graphs meet: a dense
// channels-last tensor (3-D NWC, 4-D NHWC or 5-D NDHWC) of 2- or 4-byte elements, which is per
// image the transpose of a [pixels][channels] matrix into [channels][pixels]. restore_output_layout
// puts it on the tensors a prepacked graph returns, contiguous_before_view before views in such a
// graph. libtorch 1.13 copies that layout at 1.7-3.6 GB/s on an AVX2 EPYC (16x256x56x56 fp32:
// 54 ms); the transpose here runs 8x8 blocks of 4-byte elements in AVX2 registers (10-13 GB/s
// there) and blocks of 16x16 elements elsewhere. Everything else is aten's copy, bit for bit.
#pragma once

#include <ATen/ATen.h>

namespace ipex::ops {

// The op's qualified name, as the passes insert it.
inline constexpr const char *kContiguousOp = "ipex::contiguous";

at::Tensor contiguous(const at::Tensor &self);

// Whether contiguous() transposes `self` itself (the tests ask).
bool contiguous_transposes(const at::Tensor &self);

// ipex::contiguous_for_view(self, size): what a following self.view(size) needs. `self` itself when
// its own strides allow that view (a channels-last activation whose channel dim a detector's head
// splits, [n, a*k, h, w] -> [n, a, k, h, w], before permuting it to [n, h, w, a, k]: no copy
// there, and the reshape after the permute is a view too), else contiguous(self). The output
// aliases `self` either way as a view's would, so contiguous_before_view puts it before views.
inline constexpr const char *kContiguousForViewOp = "ipex::contiguous_for_view";

at::Tensor contiguous_for_view(const at::Tensor &self, at::IntArrayRef size);

}  // namespace ipex::ops
