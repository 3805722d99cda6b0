#include "ops/layout_op.h"

#include <ATen/InferSize.h>
#include <ATen/Parallel.h>
#include <ATen/TensorUtils.h>
#include <immintrin.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>

#include "base/isa.h"
#include "ops/onednn_utils.h"
#include "ops/op_errors.h"

namespace ipex::ops {
namespace {

// Pixels per task: a task writes every channel's run of this many pixels.
constexpr int64_t kPixelBlock = 64;
// Element block of the portable transpose.
constexpr int64_t kBlock = 16;

// dst[c * pixels + p] = src[p * channels + c] for p in [p0, p1), every c (one image).
template <class T>
void transpose_portable(const T *src, T *dst, int64_t pixels, int64_t channels, int64_t p0, int64_t p1) {
    for (int64_t c0 = 0; c0 < channels; c0 += kBlock) {
        const int64_t c1 = std::min(channels, c0 + kBlock);
        for (int64_t q0 = p0; q0 < p1; q0 += kBlock) {
            const int64_t q1 = std::min(p1, q0 + kBlock);
            for (int64_t c = c0; c < c1; ++c)
                for (int64_t p = q0; p < q1; ++p) dst[c * pixels + p] = src[p * channels + c];
        }
    }
}

// The 8x8 block of 4-byte elements at s (rows ls apart) transposed to d (rows ld apart).
[[gnu::target("avx2")]] inline void transpose_8x8(const float *s, int64_t ls, float *d, int64_t ld) {
    __m256 r[8], t[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(s + i * ls);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    // r[0..7]: rows 0-3 of the output's columns in 4-element halves, then rows 4-7.
    for (int h = 0; h < 8; h += 4) {
        r[h] = _mm256_shuffle_ps(t[h], t[h + 2], 0x44);
        r[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], 0xEE);
        r[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0x44);
        r[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0xEE);
    }
    for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(d + i * ld, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
        _mm256_storeu_ps(d + (i + 4) * ld, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
    }
}

// transpose_portable for 4-byte elements, 8x8 blocks in AVX2 registers (moved as floats: the
// bits are only moved, so any 4-byte type).
[[gnu::target("avx2")]] void transpose_avx2(const float *src, float *dst, int64_t pixels, int64_t channels, int64_t p0,
                                            int64_t p1) {
    for (int64_t c0 = 0; c0 < channels; c0 += 8) {
        const int64_t c1 = std::min(channels, c0 + 8);
        int64_t p = p0;
        if (c1 - c0 == 8)
            for (; p + 8 <= p1; p += 8) transpose_8x8(src + p * channels + c0, channels, dst + c0 * pixels + p, pixels);
        for (int64_t c = c0; c < c1; ++c)
            for (int64_t q = p; q < p1; ++q) dst[c * pixels + q] = src[q * channels + c];
    }
}

template <class T>
void transpose_images(const T *src, T *dst, int64_t images, int64_t pixels, int64_t channels) {
    const int64_t blocks = (pixels + kPixelBlock - 1) / kPixelBlock;
    const bool avx2 = sizeof(T) == 4 && isa::avx2();
    const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, kPixelBlock * channels));
    at::parallel_for(0, images * blocks, grain, [&](int64_t begin, int64_t end) {
        for (int64_t task = begin; task < end; ++task) {
            const int64_t image = task / blocks, p0 = task % blocks * kPixelBlock;
            const int64_t p1 = std::min(pixels, p0 + kPixelBlock), offset = image * pixels * channels;
            if constexpr (sizeof(T) == 4) {
                if (avx2) {
                    transpose_avx2(reinterpret_cast<const float *>(src + offset),
                                   reinterpret_cast<float *>(dst + offset), pixels, channels, p0, p1);
                    continue;
                }
            }
            transpose_portable(src + offset, dst + offset, pixels, channels, p0, p1);
        }
    });
}

}  // namespace

bool contiguous_transposes(const at::Tensor &self) {
    const int64_t size = static_cast<int64_t>(self.element_size());
    return self.layout() == at::kStrided && self.device().is_cpu() && !self.is_contiguous() && self.dim() >= 3 &&
           self.dim() <= 5 && (size == 2 || size == 4) && !self.is_complex() && !self.is_quantized() &&
           !self.is_neg() && !self.is_conj() && is_channels_last(self);
}

at::Tensor contiguous(const at::Tensor &self) {
    if (!contiguous_transposes(self)) return self.contiguous();
    at::Tensor out = at::empty(self.sizes(), self.options().memory_format(at::MemoryFormat::Contiguous));
    const int64_t images = self.size(0), channels = self.size(1), pixels = self.numel() / (images * channels);
    if (self.element_size() == 4)
        transpose_images(static_cast<const int32_t *>(self.data_ptr()), static_cast<int32_t *>(out.data_ptr()), images,
                         pixels, channels);
    else
        transpose_images(static_cast<const int16_t *>(self.data_ptr()), static_cast<int16_t *>(out.data_ptr()), images,
                         pixels, channels);
    return out;
}

at::Tensor contiguous_for_view(const at::Tensor &self, at::IntArrayRef size) {
    // A size the view itself would refuse: the view reports it, on self as the original did.
    at::DimVector shape;
    try {
        shape = at::infer_size_dv(size, self.numel());
    } catch (const std::exception &) {  // std::runtime_error or c10::Error, by the case
        return self;
    }
    if (at::detail::computeStride(self.sizes(), self.strides(), shape)) return self;
    return contiguous(self);
}

}  // namespace ipex::ops

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    m.def("contiguous(Tensor(a) self) -> Tensor(a)", IPEX_GUARDED(ipex::ops::contiguous));
    m.def("contiguous_for_view(Tensor(a) self, int[] size) -> Tensor(a)", IPEX_GUARDED(ipex::ops::contiguous_for_view));
}
