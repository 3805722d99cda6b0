#include "ops/int8/int8_pool.h"

#include <ATen/Parallel.h>
#include <immintrin.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <vector>

#include "ops/op_errors.h"
#include "ops/own_kernels.h"
#include "ops/pool_op.h"
#include "ops/int8/q8_tensor.h"

namespace ipex::quant {

namespace {

// The maximum of `count` rows at byte `at` (the lanes of m).
[[gnu::target("avx512f,avx512bw")]] inline __m512i max_at(const uint8_t *const *rows, int64_t count, int64_t at,
                                                         __mmask64 m, bool is_signed) {
    __m512i best = _mm512_maskz_loadu_epi8(m, rows[0] + at);
    for (int64_t r = 1; r < count; ++r) {
        const __m512i v = _mm512_maskz_loadu_epi8(m, rows[r] + at);
        best = is_signed ? _mm512_max_epi8(best, v) : _mm512_max_epu8(best, v);
    }
    return best;
}

// The maximum of `count` rows of `bytes` bytes each, at out.
[[gnu::target("avx512f,avx512bw")]] void max_of_rows(const uint8_t *const *rows, int64_t count, int64_t bytes,
                                                     bool is_signed, uint8_t *out) {
    int64_t i = 0;
    for (; i + 64 <= bytes; i += 64) _mm512_storeu_si512(out + i, max_at(rows, count, i, ~__mmask64(0), is_signed));
    if (i < bytes) {
        const __mmask64 m = (__mmask64(1) << (bytes - i)) - 1;
        _mm512_mask_storeu_epi8(out + i, m, max_at(rows, count, i, m, is_signed));
    }
}

}  // namespace

[[gnu::target("avx512f,avx512bw")]] void max_pool_row(const uint8_t *const *rows, int64_t count, int64_t w, int64_t c,
                                                      const ops::PoolWindow &win, int64_t ow, bool is_signed,
                                                      uint8_t *out) {
    // The rows' maximum first (one row to read across), then each window's along it.
    thread_local std::vector<uint8_t> column_max;
    const uint8_t *line = count > 0 ? rows[0] : nullptr;  // none: aten's sizes leave no empty window
    if (count > 1) {
        column_max.resize(static_cast<size_t>(w * c));
        max_of_rows(rows, count, w * c, is_signed, column_max.data());
        line = column_max.data();
    }
    const __m512i lowest = _mm512_set1_epi8(is_signed ? -128 : 0);
    for (int64_t x = 0; x < ow; ++x, out += c) {
        // The window's columns inside the row: kx from first to last.
        const int64_t x0 = x * win.stride[1] - win.padding[1];
        const int64_t first = x0 >= 0 ? 0 : (-x0 + win.dilation[1] - 1) / win.dilation[1];
        const int64_t last = !line || x0 > w - 1 ? 0 : std::min(win.kernel[1], (w - 1 - x0) / win.dilation[1] + 1);
        for (int64_t c0 = 0; c0 < c; c0 += 64) {
            const __mmask64 m = c - c0 >= 64 ? ~__mmask64(0) : (__mmask64(1) << (c - c0)) - 1;
            __m512i best = lowest;
            for (int64_t kx = first; kx < last; ++kx) {
                const __m512i v = _mm512_maskz_loadu_epi8(m, line + (x0 + kx * win.dilation[1]) * c + c0);
                best = is_signed ? _mm512_max_epi8(best, v) : _mm512_max_epu8(best, v);
            }
            if (c - c0 >= 64)  // a masked byte store only for the tail: far slower on AMD's cores
                _mm512_storeu_si512(out + c0, best);
            else
                _mm512_mask_storeu_epi8(out + c0, m, best);
        }
    }
}

namespace {

struct Geometry {
    int64_t n, c, h, w, oh, ow;
    ops::PoolWindow win;
};

// Output row `row` (image row / oh, output row row % oh) from the window's rows inside the image.
void pool_row(const uint8_t *src, uint8_t *dst, const Geometry &g, int64_t row, bool is_signed) {
    const int64_t img = row / g.oh, y = row % g.oh;
    std::array<const uint8_t *, kMaxPoolRows> rows;
    int64_t count = 0;
    for (int64_t ky = 0; ky < g.win.kernel[0]; ++ky) {
        const int64_t iy = y * g.win.stride[0] - g.win.padding[0] + ky * g.win.dilation[0];
        if (iy >= 0 && iy < g.h) rows[count++] = src + (img * g.h + iy) * g.w * g.c;
    }
    max_pool_row(rows.data(), count, g.w, g.c, g.win, g.ow, is_signed, dst + (img * g.oh + y) * g.ow * g.c);
}

// Images [i0, i1) of a channels-last int8 batch: each channel's sum over its pixels, less the
// zero point's share, times multiplier, rounded to nearest even, plus the zero point, saturated.
[[gnu::target("avx512f,avx512bw,avx512vl")]] void global_mean_images(const uint8_t *src, uint8_t *dst, int64_t i0,
                                                                     int64_t i1, int64_t c, int64_t pixels,
                                                                     bool is_signed, int32_t zp, float multiplier) {
    const __m512 mul = _mm512_set1_ps(multiplier);
    const __m512i bias = _mm512_set1_epi32(static_cast<int32_t>(-zp * pixels)), zpv = _mm512_set1_epi32(zp);
    const __m512i lo = _mm512_set1_epi32(is_signed ? -128 : 0), hi = _mm512_set1_epi32(is_signed ? 127 : 255);
    for (int64_t img = i0; img < i1; ++img) {
        const uint8_t *in = src + img * pixels * c;
        for (int64_t c0 = 0; c0 < c; c0 += 16) {
            const int64_t left = c - c0;
            const __mmask16 m = left >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << left) - 1);
            __m512i acc = bias;
            for (int64_t p = 0; p < pixels; ++p) {
                const __m128i b = _mm_maskz_loadu_epi8(m, in + p * c + c0);
                acc = _mm512_add_epi32(acc, is_signed ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b));
            }
            __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(acc), mul)), zpv);
            q = _mm512_min_epi32(_mm512_max_epi32(q, lo), hi);
            __m128i bytes = _mm512_cvtepi32_epi8(q);
            asm("" : "+v"(bytes));  // kept in a register: a narrowing store runs slowly on some CPUs
            if (left >= 16)
                _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + img * c + c0), bytes);
            else
                _mm_mask_storeu_epi8(dst + img * c + c0, m, bytes);
        }
    }
}

}  // namespace

at::Tensor int8_adaptive_avg_pool2d(const at::Tensor &input, at::IntArrayRef output_size) {
    const auto aten = [&] { return at::adaptive_avg_pool2d(input, output_size); };
    if (!is_q8_per_tensor(input) || input.dim() != 4 || output_size.size() != 2 || output_size[0] != 1 ||
        output_size[1] != 1 || !input.is_contiguous(at::MemoryFormat::ChannelsLast) || input.numel() == 0 ||
        !ops::own_kernels::available(false))
        return aten();
    const int64_t n = input.size(0), c = input.size(1), pixels = input.size(2) * input.size(3);
    constexpr int64_t kMostPixels = int64_t{1} << 23;  // the int32 sums of 255 x pixels (and the zero point's)
    if (pixels > kMostPixels) return aten();
    // The output keeps the input's parameters, as aten's quantized pooling does.
    at::Tensor out = at::_empty_affine_quantized({n, c, 1, 1}, input.options(), input.q_scale(),
                                                 input.q_zero_point(), at::MemoryFormat::ChannelsLast);
    const float multiplier = static_cast<float>(input.q_scale() / out.q_scale() / static_cast<double>(pixels));
    const auto *src = static_cast<const uint8_t *>(input.data_ptr());
    auto *dst = static_cast<uint8_t *>(out.data_ptr());
    const bool is_signed = input.scalar_type() == at::kQInt8;
    const int32_t zp = static_cast<int32_t>(input.q_zero_point());
    at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
        global_mean_images(src, dst, begin, end, c, pixels, is_signed, zp, multiplier);
    });
    return out;
}

at::Tensor int8_max_pool2d(const at::Tensor &input, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                           at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
    const auto aten = [&] { return at::max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode); };
    if (!is_q8_per_tensor(input) || input.dim() != 4 || !input.is_contiguous(at::MemoryFormat::ChannelsLast) ||
        !ops::own_kernels::available(false))
        return aten();
    const auto window = ops::pool_window(kernel_size, stride, padding, dilation);
    if (!window) return aten();  // aten's message for bad arguments
    if (window->kernel[0] > kMaxPoolRows) return aten();
    Geometry g{input.size(0), input.size(1), input.size(2), input.size(3), 0, 0, *window};
    g.oh = ops::pooled_size(g.h, g.win.kernel[0], g.win.stride[0], g.win.padding[0], g.win.dilation[0], ceil_mode);
    g.ow = ops::pooled_size(g.w, g.win.kernel[1], g.win.stride[1], g.win.padding[1], g.win.dilation[1], ceil_mode);
    if (g.oh < 1 || g.ow < 1 || input.numel() == 0) return aten();
    at::Tensor out = at::_empty_affine_quantized({g.n, g.c, g.oh, g.ow}, input.options(), input.q_scale(),
                                                 input.q_zero_point(), at::MemoryFormat::ChannelsLast);
    const auto *src = static_cast<const uint8_t *>(input.data_ptr());
    auto *dst = static_cast<uint8_t *>(out.data_ptr());
    const bool is_signed = input.scalar_type() == at::kQInt8;
    const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, g.ow * g.c));
    at::parallel_for(0, g.n * g.oh, grain, [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) pool_row(src, dst, g, row, is_signed);
    });
    return out;
}

}  // namespace ipex::quant

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    m.def("int8_max_pool2d(Tensor input, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
          "int[2] dilation=1, bool ceil_mode=False) -> Tensor",
          IPEX_GUARDED(ipex::quant::int8_max_pool2d));
    m.def("int8_adaptive_avg_pool2d(Tensor input, int[2] output_size) -> Tensor",
          IPEX_GUARDED(ipex::quant::int8_adaptive_avg_pool2d));
}
