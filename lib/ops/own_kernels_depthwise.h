// The geometry both builds of the own depthwise kernel share (own_kernels_depthwise_avx512.cpp,
// own_kernels_depthwise_avx2.cpp): which kernel rows an output row reads and which output
// columns read inside the image. Portable integer code in an unnamed namespace, so each file
// built with its own ISA flags keeps its own copy.
#pragma once

#include <cstdint>

#include "ops/own_kernels.h"

namespace ipex::ops::own_kernels {
namespace {

// Where one output row reads: the taps kh in [kh_lo, kh_hi) fall inside the image; the
// channels [c_lo, c_hi) of this pass over the row.
struct Row {
    int64_t n = 0, oh = 0, kh_lo = 0, kh_hi = 0, c_lo = 0, c_hi = 0;
};

// Output row `row` (image row / oh, output y row % oh) over the channels [c_lo, c_hi).
inline Row row_of(const Problem &p, int64_t row, int64_t c_lo, int64_t c_hi) {
    Row r;
    r.n = row / p.oh;
    r.oh = row % p.oh;
    r.c_lo = c_lo;
    r.c_hi = c_hi;
    const int64_t ih0 = r.oh * p.stride_h - p.pad_h;
    r.kh_lo = 0;
    r.kh_hi = p.kh;
    while (r.kh_lo < p.kh && ih0 + r.kh_lo * p.dilation_h < 0) ++r.kh_lo;
    while (r.kh_hi > r.kh_lo && ih0 + (r.kh_hi - 1) * p.dilation_h >= p.ih) --r.kh_hi;
    return r;
}

// The output columns [lo, hi) whose taps all fall inside the image: ow * stride - pad >= 0 and
// the last tap ow * stride - pad + (kw - 1) * dilation < iw (lo <= hi <= ow).
struct Columns {
    int64_t lo = 0, hi = 0;
};

inline Columns interior_columns(const Problem &p) {
    const int64_t first = (p.pad_w + p.stride_w - 1) / p.stride_w;
    const int64_t last = p.iw - 1 - (p.kw - 1) * p.dilation_w + p.pad_w;  // ow * stride <= last
    const int64_t end = last < 0 ? 0 : last / p.stride_w + 1;
    Columns cols;
    cols.lo = first < p.ow ? first : p.ow;
    cols.hi = end < p.ow ? end : p.ow;
    if (cols.hi < cols.lo) cols.hi = cols.lo;
    return cols;
}

}  // namespace
}  // namespace ipex::ops::own_kernels
