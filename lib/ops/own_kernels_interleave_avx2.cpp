// The AVX2 build of the own channel interleave (own_kernels::Interleave: two channel groups of
// each pixel interleaved, bit copies). Built with -mavx2; own_kernels::run_interleave calls it
// only where interleave_available() and AVX-512 is missing.
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "ops/own_kernels.h"

namespace ipex::ops::own_kernels {
namespace {

// out[2 j] = a[j], out[2 j + 1] = b[j] for j < n: 8 (4-byte) values of each group per step,
// the tail in scalars (the moves copy bits, so 4-byte values of any type go through as float).
void interleave(const float *a, const float *b, float *out, int64_t n) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 va = _mm256_loadu_ps(a + j), vb = _mm256_loadu_ps(b + j);
        const __m256 lo = _mm256_unpacklo_ps(va, vb), hi = _mm256_unpackhi_ps(va, vb);  // per 128-bit half
        _mm256_storeu_ps(out + 2 * j, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_storeu_ps(out + 2 * j + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
    for (; j < n; ++j) out[2 * j] = a[j], out[2 * j + 1] = b[j];
}

// The same for 2-byte values, 16 of each group per step.
void interleave(const uint16_t *a, const uint16_t *b, uint16_t *out, int64_t n) {
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(a + j));
        const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(b + j));
        const __m256i lo = _mm256_unpacklo_epi16(va, vb), hi = _mm256_unpackhi_epi16(va, vb);
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + 2 * j), _mm256_permute2x128_si256(lo, hi, 0x20));
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(out + 2 * j + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
    }
    for (; j < n; ++j) out[2 * j] = a[j], out[2 * j + 1] = b[j];
}

template <typename T>
void run_typed(const Interleave &p) {
    const int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, p.cpg));
    at::parallel_for(0, p.pixels, grain, [&](int64_t begin, int64_t end) {
        for (int64_t q = begin; q < end; ++q)
            interleave(static_cast<const T *>(p.a) + q * p.a_stride, static_cast<const T *>(p.b) + q * p.b_stride,
                       static_cast<T *>(p.dst) + q * 2 * p.cpg, p.cpg);
    });
}

}  // namespace

void run_interleave_avx2(const Interleave &p) {
    if (p.bf16) run_typed<uint16_t>(p);
    else run_typed<float>(p);
}

}  // namespace ipex::ops::own_kernels
