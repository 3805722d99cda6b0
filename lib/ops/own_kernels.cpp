// The portable parts of the own kernels (own_kernels.h): which post-ops they compute, whether
// this CPU runs them (and which build of the grouped kernel), the choice against oneDNN, and the
// paired depthwise weight layout.
#include "ops/own_kernels.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/isa.h"

namespace ipex::ops {
namespace own_kernels {

bool to_act(const std::string &kind, Act *act) {
    static const std::pair<const char *, Act> table[] = {{"relu", Act::relu},       {"leaky_relu", Act::leaky_relu},
                                                         {"clip", Act::clip},       {"silu", Act::silu},
                                                         {"sigmoid", Act::sigmoid}, {"hardswish", Act::hardswish}};
    for (const auto &[name, value] : table)
        if (kind == name) {
            *act = value;
            return true;
        }
    return false;
}

bool available(bool bf16) { return bf16 ? isa::avx512_bf16() : isa::avx512(); }

bool depthwise_available(bool bf16) { return available(bf16) || (!bf16 && isa::avx2_fma()); }

void run(const Problem &p) {
    if (available(p.bf16_in || p.bf16_out)) return run_depthwise_avx512(p);
    TORCH_CHECK(!p.bf16_in && !p.bf16_out && p.weight_blocks,
                "ipex convolution: the depthwise kernel's AVX2 build takes fp32 and the weight in blocks only");
    run_depthwise_avx2(p);
}

bool grouped_available(bool bf16) { return available(bf16) || (!bf16 && isa::avx2_fma()); }

void run_grouped(const Grouped &p) {
    if (!available(p.bf16)) return run_grouped_avx2(p);
    TORCH_CHECK(!p.sum, "ipex convolution: the grouped kernel's AVX-512 build takes no residual sum");
    run_grouped_avx512(p);
}

bool interleave_available() { return available(false) || isa::avx2(); }

void run_interleave(const Interleave &p) {
    if (available(false)) return run_interleave_avx512(p);
    TORCH_CHECK(isa::avx2(), "ipex channel_shuffle: the interleave needs AVX2 or AVX-512");
    run_interleave_avx2(p);
}

bool grouped_walks_tiles(const Grouped &p) {
    const int64_t l2 = isa::l2_cache_bytes();
    const int64_t bytes = p.bf16 ? 2 : 4;
    const int64_t weights = p.groups * p.out_per_group * p.in_per_group * p.kh * p.kw * bytes;
    // The input the blocks read: all of it, or less where a strided 1x1 kernel skips pixels.
    const int64_t c_in = p.groups * p.in_per_group;
    const int64_t input = std::min(p.n * p.ih * p.iw, p.n * p.oh * p.ow * p.kh * p.kw) * c_in * bytes;
    const int64_t tiles = p.groups * (p.out_per_group / 16);
    return weights > l2 && input <= kTileWalkInputL2s * l2 && tiles >= 2 * at::get_num_threads() &&
           p.n * p.oh * p.ow <= kMaxTileWalkPixels;
}

Choice choice_from_env(const char *value) {
    const std::string v = value ? value : "";
    if (v.empty() || v == "auto") return Choice::timed;
    if (v == "0") return Choice::onednn;
    if (v == "1") return Choice::own;
    TORCH_CHECK(false, "IPEX_CONV_KERNELS must be 0, 1 or auto, got '", v, "'");
}

bool prefer_own(const double *own_seconds, const double *onednn_seconds, int runs) {
    TORCH_CHECK(runs > 0, "depthwise kernel choice: no timings");
    const double own = *std::min_element(own_seconds, own_seconds + runs);
    const double onednn = *std::min_element(onednn_seconds, onednn_seconds + runs);
    return own < onednn;
}

Timed time_both(const std::function<void()> &own, const std::function<void()> &onednn, int runs,
                const std::function<void()> &before) {
    TORCH_CHECK(runs > 0, "ipex convolution: the kernel choice needs at least one timed run");
    onednn();
    own();
    const auto seconds = [&](const std::function<void()> &f) {
        if (before) before();
        const auto start = std::chrono::steady_clock::now();
        f();
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    std::vector<double> own_s(runs), onednn_s(runs);
    for (int i = 0; i < runs; ++i) {
        onednn_s[i] = seconds(onednn);
        own_s[i] = seconds(own);
    }
    return {prefer_own(own_s.data(), onednn_s.data(), runs), *std::min_element(own_s.begin(), own_s.end()),
            *std::min_element(onednn_s.begin(), onednn_s.end())};
}

void CacheEvictor::operator()() {
    if (buffer_.empty()) buffer_.resize(static_cast<size_t>(2 * isa::l3_cache_bytes()));
    uint8_t *data = buffer_.data();
    at::parallel_for(0, static_cast<int64_t>(buffer_.size()), int64_t{1} << 20, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; i += 64) data[i] = static_cast<uint8_t>(data[i] + 1);
    });
}

int64_t weight_pairs_size(int64_t kh, int64_t kw, int64_t c) { return 2 * kh * kw * weight_pairs_blocks(c) * 64; }

int64_t weight_blocks_size(int64_t kh, int64_t kw, int64_t c) { return (c + 15) / 16 * kh * kw * 16; }

void pack_weight_blocks(const float *weight, int64_t kh, int64_t kw, int64_t c, float *out) {
    std::fill(out, out + weight_blocks_size(kh, kw, c), 0.f);
    for (int64_t tap = 0; tap < kh * kw; ++tap)
        for (int64_t ch = 0; ch < c; ++ch) out[((ch / 16) * kh * kw + tap) * 16 + ch % 16] = weight[tap * c + ch];
}

void pack_weight_pairs(const float *weight, int64_t kh, int64_t kw, int64_t c, uint16_t *out) {
    const int64_t blocks = weight_pairs_blocks(c);
    auto bits = [](float v) { return c10::BFloat16(v).x; };  // exact: the weight holds bf16 values
    std::fill(out, out + weight_pairs_size(kh, kw, c), uint16_t(0));
    for (int64_t s = 0; s < 2; ++s)
        for (int64_t h = 0; h < kh; ++h)
            for (int64_t w = 0; w < kw; ++w)
                for (int64_t b = 0; b < blocks; ++b) {
                    uint16_t *block = out + (((s * kh + h) * kw + w) * blocks + b) * 64;
                    for (int half = 0; half < 2; ++half)
                        for (int j = 0; j < 16; ++j) {
                            const int64_t ch = 32 * b + pair_lane_channel(half, j);
                            if (ch >= c) continue;
                            uint16_t *pair = block + half * 32 + 2 * j;
                            pair[0] = bits(weight[(h * kw + w) * c + ch]);
                            if (s == 0 && h + 1 < kh) pair[1] = bits(weight[((h + 1) * kw + w) * c + ch]);
                        }
                }
}

namespace {

// Pixels q0 .. q1 of run_scale_shift_portable. Inlined into each caller, so the AVX2 + FMA one
// below is vectorized 8 lanes wide with VFMADD; the generic one calls std::fma, exact either way.
template <bool kBf16, bool kRelu>
[[gnu::always_inline]] inline void scale_shift_pixels(const ScaleShift &p, int64_t total, int64_t q0, int64_t q1) {
    using T = std::conditional_t<kBf16, c10::BFloat16, float>;
    T *const dst = static_cast<T *>(p.dst);
    for (int64_t q = q0; q < q1; ++q) {
        int64_t offset = 0;
        for (int64_t i = 0; i < p.inputs; ++i) {
            const int64_t c = p.channels[i];
            const T *const src = static_cast<const T *>(p.src[i]) + q * c;
            T *const out = dst + q * total + offset;
            const float *const scale = p.scale + offset, *const shift = p.shift + offset;
            for (int64_t j = 0; j < c; ++j) {
                float v = std::fma(static_cast<float>(src[j]), scale[j], shift[j]);
                if constexpr (kRelu) v = v < 0.0f ? 0.0f : v;  // NaN stays NaN
                out[j] = static_cast<T>(v);
            }
            offset += c;
        }
    }
}

template <bool kBf16, bool kRelu>
void scale_shift_generic(const ScaleShift &p, int64_t total, int64_t q0, int64_t q1) {
    scale_shift_pixels<kBf16, kRelu>(p, total, q0, q1);
}

template <bool kBf16, bool kRelu>
[[gnu::target("avx2,fma")]] void scale_shift_avx2(const ScaleShift &p, int64_t total, int64_t q0, int64_t q1) {
    scale_shift_pixels<kBf16, kRelu>(p, total, q0, q1);
}

using ScaleShiftPixels = void (*)(const ScaleShift &, int64_t, int64_t, int64_t);

template <bool kBf16, bool kRelu>
ScaleShiftPixels scale_shift_for_cpu() {
    return isa::avx2_fma() ? &scale_shift_avx2<kBf16, kRelu> : &scale_shift_generic<kBf16, kRelu>;
}

// Output rows r0 .. r1 (over images and rows) of run_max_pool_portable, inlined into each caller
// as scale_shift_pixels is. The running maximum takes a value that is greater or NaN, as aten's
// kernel does, so a NaN stays and -inf windows give -inf.
template <class T>
[[gnu::always_inline]] inline void max_pool_rows(const MaxPool &p, int64_t r0, int64_t r1) {
    const T *const src = static_cast<const T *>(p.src);
    T *const dst = static_cast<T *>(p.dst);
    const int64_t c = p.c;
    // The first tap inside the image and the tap count, along one dim.
    const auto clip = [](int64_t start, int64_t k, int64_t d, int64_t size, int64_t *first, int64_t *count) {
        int64_t t0 = start < 0 ? (-start + d - 1) / d : 0, t1 = k;
        while (t1 > t0 && start + (t1 - 1) * d >= size) --t1;
        *first = t0;
        *count = t1 - t0;
    };
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t img = r / p.oh, oy = r % p.oh;
        int64_t ty, ny;
        clip(oy * p.stride_h - p.pad_h, p.kh, p.dilation_h, p.ih, &ty, &ny);
        for (int64_t ox = 0; ox < p.ow; ++ox) {
            int64_t tx, nx;
            clip(ox * p.stride_w - p.pad_w, p.kw, p.dilation_w, p.iw, &tx, &nx);
            T *const out = dst + ((img * p.oh + oy) * p.ow + ox) * c;
            bool first = true;
            for (int64_t i = 0; i < ny; ++i) {
                const int64_t iy = oy * p.stride_h - p.pad_h + (ty + i) * p.dilation_h;
                for (int64_t j = 0; j < nx; ++j) {
                    const int64_t ix = ox * p.stride_w - p.pad_w + (tx + j) * p.dilation_w;
                    const T *const in = src + ((img * p.ih + iy) * p.iw + ix) * c;
                    if (first) {
                        for (int64_t k = 0; k < c; ++k) out[k] = in[k];
                        first = false;
                        continue;
                    }
                    for (int64_t k = 0; k < c; ++k) {
                        const float v = static_cast<float>(in[k]), m = static_cast<float>(out[k]);
                        out[k] = (v > m || v != v) ? in[k] : out[k];
                    }
                }
            }
            if (first)  // no tap inside the image: aten's starting value
                for (int64_t k = 0; k < c; ++k) out[k] = static_cast<T>(-std::numeric_limits<float>::infinity());
        }
    }
}

template <class T>
void max_pool_generic(const MaxPool &p, int64_t r0, int64_t r1) {
    max_pool_rows<T>(p, r0, r1);
}

template <class T>
[[gnu::target("avx2")]] void max_pool_avx2(const MaxPool &p, int64_t r0, int64_t r1) {
    max_pool_rows<T>(p, r0, r1);
}

}  // namespace

void run_max_pool_portable(const MaxPool &p) {
    TORCH_CHECK(p.oh > 0 && p.ow > 0 && p.kh > 0 && p.kw > 0, "max pool: empty output or window");
    using Rows = void (*)(const MaxPool &, int64_t, int64_t);
    Rows run = nullptr;
    if (p.bf16) run = isa::avx2() ? &max_pool_avx2<c10::BFloat16> : &max_pool_generic<c10::BFloat16>;
    else run = isa::avx2() ? &max_pool_avx2<float> : &max_pool_generic<float>;
    // A task of rows holding about 64k values.
    const int64_t per_row = p.ow * p.c * p.kh * p.kw;
    const int64_t grain = per_row >= (1 << 16) ? 1 : (1 << 16) / per_row;
    at::parallel_for(0, p.n * p.oh, grain, [&](int64_t begin, int64_t end) { run(p, begin, end); });
}

namespace {

constexpr int64_t kMeanChunk = kSpatialMeanChunk;  // pixels a task sums
constexpr int64_t kMeanBlock = 64;   // channels summed at a time: 8 AVX2 vectors of sums

// Tasks t0 .. t1 (image, chunk of pixels) of run_spatial_mean_portable: each chunk's sums per
// channel into its row of `partial` (`row` values apart). Inlined into each caller, so the
// AVX2 one adds 8 lanes at a time.
template <class T>
[[gnu::always_inline]] inline void mean_chunks(const SpatialMean &p, int64_t t0, int64_t t1, int64_t row,
                                               float *partial) {
    const T *const src = static_cast<const T *>(p.src);
    const int64_t chunks = (p.hw + kMeanChunk - 1) / kMeanChunk;
    for (int64_t task = t0; task < t1; ++task) {
        const int64_t image = task / chunks, q0 = task % chunks * kMeanChunk;
        const int64_t q1 = std::min(p.hw, q0 + kMeanChunk);
        for (int64_t c0 = 0; c0 < p.c; c0 += kMeanBlock) {
            const int64_t width = std::min(kMeanBlock, p.c - c0);
            float sum[kMeanBlock] = {};
            const T *pixel = src + (image * p.hw + q0) * p.c + c0;
            if (width == kMeanBlock)
                for (int64_t q = q0; q < q1; ++q, pixel += p.c)
                    for (int64_t k = 0; k < kMeanBlock; ++k) sum[k] += static_cast<float>(pixel[k]);
            else
                for (int64_t q = q0; q < q1; ++q, pixel += p.c)
                    for (int64_t k = 0; k < width; ++k) sum[k] += static_cast<float>(pixel[k]);
            std::copy(sum, sum + width, partial + task * row + c0);
        }
    }
}

template <class T>
void mean_chunks_generic(const SpatialMean &p, int64_t t0, int64_t t1, int64_t row, float *partial) {
    mean_chunks<T>(p, t0, t1, row, partial);
}

template <class T>
[[gnu::target("avx2")]] void mean_chunks_avx2(const SpatialMean &p, int64_t t0, int64_t t1, int64_t row,
                                              float *partial) {
    mean_chunks<T>(p, t0, t1, row, partial);
}

template <class T>
void spatial_mean_portable(const SpatialMean &p) {
    const int64_t chunks = (p.hw + kMeanChunk - 1) / kMeanChunk, row = p.c;
    const auto sums = isa::avx2() ? &mean_chunks_avx2<T> : &mean_chunks_generic<T>;
    // every value is written by the first step before the second reads it
    const std::unique_ptr<float[]> partial(new float[p.n * chunks * row]);
    at::parallel_for(0, p.n * chunks, 1, [&](int64_t begin, int64_t end) { sums(p, begin, end, row, partial.get()); });
    T *const dst = static_cast<T *>(p.dst);
    const float count = static_cast<float>(p.hw);
    at::parallel_for(0, p.n, 1, [&](int64_t begin, int64_t end) {
        for (int64_t image = begin; image < end; ++image)
            for (int64_t ch = 0; ch < p.c; ++ch) {
                float total = 0.0f;
                for (int64_t chunk = 0; chunk < chunks; ++chunk) total += partial[(image * chunks + chunk) * row + ch];
                dst[image * p.c + ch] = static_cast<T>(total / count);
            }
    });
}

}  // namespace

void run_spatial_mean_portable(const SpatialMean &p) {
    if (p.bf16) spatial_mean_portable<c10::BFloat16>(p); else spatial_mean_portable<float>(p);
}

void run_scale_shift_portable(const ScaleShift &p) {
    constexpr int64_t kChunk = 32;  // pixels per task
    int64_t total = 0;
    for (int64_t i = 0; i < p.inputs; ++i) total += p.channels[i];
    ScaleShiftPixels run = nullptr;
    if (p.bf16) run = p.relu ? scale_shift_for_cpu<true, true>() : scale_shift_for_cpu<true, false>();
    else run = p.relu ? scale_shift_for_cpu<false, true>() : scale_shift_for_cpu<false, false>();
    at::parallel_for(0, (p.pixels + kChunk - 1) / kChunk, 1, [&](int64_t begin, int64_t end) {
        run(p, total, begin * kChunk, std::min(p.pixels, end * kChunk));
    });
}

}  // namespace own_kernels

}  // namespace ipex::ops
