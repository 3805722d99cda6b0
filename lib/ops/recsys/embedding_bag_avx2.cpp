// The merged EmbeddingBag's row step (embedding_bag_kernel.h) on 8 elements a register: the
// portable loop's operations element by element (a product then a sum, no fused multiply-add),
// the last dim % 8 elements by the portable loop itself. Built with AVX2 flags; runs only where
// the CPU has AVX2 (isa::cpu_features).
#include <immintrin.h>

#include <cstring>

#include "ops/recsys/embedding_bag_kernel.h"

namespace ipex::ops::recsys::avx2 {

namespace {

constexpr int64_t kLanes = 8;

__m256 load_row(const void *row, RowType type, int64_t k, __m256 scale, __m256 bias) {
    if (type == RowType::bf16) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i *>(static_cast<const uint16_t *>(row) + k));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    if (type == RowType::uint8_rowwise) {
        int64_t q8;
        std::memcpy(&q8, static_cast<const uint8_t *>(row) + k, sizeof(q8));
        const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(q8)));
        return _mm256_add_ps(_mm256_mul_ps(q, scale), bias);
    }
    return _mm256_loadu_ps(static_cast<const float *>(row) + k);
}

}  // namespace

void add_row(const void *row, RowType type, const float *weight, int64_t dim, float *acc) {
    float scale = 0.f, bias = 0.f;
    if (type == RowType::uint8_rowwise) read_row_tail(row, dim, &scale, &bias);
    const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(bias);
    const int64_t full = dim / kLanes * kLanes;
    if (weight) {
        const __m256 w = _mm256_set1_ps(*weight);
        for (int64_t k = 0; k < full; k += kLanes) {
            const __m256 v = _mm256_mul_ps(load_row(row, type, k, s, z), w);
            _mm256_storeu_ps(acc + k, _mm256_add_ps(_mm256_loadu_ps(acc + k), v));
        }
    } else {
        for (int64_t k = 0; k < full; k += kLanes) {
            _mm256_storeu_ps(acc + k, _mm256_add_ps(_mm256_loadu_ps(acc + k), load_row(row, type, k, s, z)));
        }
    }
    // The tail: the portable step (a uint8 row's scale and bias stay after all `dim` values).
    add_row_range(row, type, weight, scale, bias, full, dim, acc);
}

}  // namespace ipex::ops::recsys::avx2
