// The fused layer-norm kernel (layer_norm_op.h). Built with AVX-512 and AVX512-BF16 flags; runs
// only after layer_norm_kernel::available().
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <cmath>

#include "kernels/avx512/math.h"
#include "ops/layer_norm_op.h"

namespace ipex::ops::layer_norm_kernel {
namespace {

using ::ipex::kernels::avx512::kLanes;
using ::ipex::kernels::avx512::tail_mask;

__m512 load(const void *base, bool bf16, int64_t j, __mmask16 m) {
    if (bf16) return ::ipex::kernels::avx512::load_bf16(static_cast<const uint16_t *>(base) + j, m);
    return _mm512_maskz_loadu_ps(m, static_cast<const float *>(base) + j);
}

void store(void *base, bool bf16, int64_t j, __mmask16 m, __m512 v) {
    if (bf16) {
        ::ipex::kernels::avx512::store_bf16(static_cast<uint16_t *>(base) + j, m, v);
    } else {
        _mm512_mask_storeu_ps(static_cast<float *>(base) + j, m, v);
    }
}

void run_row(const Problem &p, int64_t r, float *s) {
    const int64_t n = p.cols;
    const int64_t offset = r * n;
    const auto *in = static_cast<const char *>(p.input) + offset * (p.bf16_in ? 2 : 4);
    const auto *other = p.other ? static_cast<const char *>(p.other) + offset * (p.bf16_other ? 2 : 4) : nullptr;
    const __m512 alpha = _mm512_set1_ps(p.alpha);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += kLanes) {
        const __mmask16 m = tail_mask(n - j);
        __m512 v = load(in, p.bf16_in, j, m);
        if (other) v = _mm512_fmadd_ps(alpha, load(other, p.bf16_other, j, m), v);
        if (p.bf16_out) v = ::ipex::kernels::avx512::round_bf16(v);
        _mm512_mask_storeu_ps(s + j, m, v);
        acc = _mm512_add_ps(acc, v);
    }
    const float mean = _mm512_reduce_add_ps(acc) / static_cast<float>(n);
    const __m512 vmean = _mm512_set1_ps(mean);
    acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += kLanes) {
        const __mmask16 m = tail_mask(n - j);
        const __m512 d = _mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, s + j), vmean);
        acc = _mm512_fmadd_ps(d, d, acc);
    }
    const float var = _mm512_reduce_add_ps(acc) / static_cast<float>(n);
    const __m512 rstd = _mm512_set1_ps(1.f / std::sqrt(var + p.eps));
    const int64_t out_size = p.bf16_out ? 2 : 4;
    void *out = static_cast<char *>(p.out) + offset * out_size;
    void *sum = p.sum ? static_cast<char *>(p.sum) + offset * out_size : nullptr;
    for (int64_t j = 0; j < n; j += kLanes) {
        const __mmask16 m = tail_mask(n - j);
        const __m512 v = _mm512_maskz_loadu_ps(m, s + j);
        if (sum) store(sum, p.bf16_out, j, m, v);
        __m512 y = _mm512_mul_ps(_mm512_sub_ps(v, vmean), rstd);
        if (p.weight) y = _mm512_mul_ps(y, _mm512_maskz_loadu_ps(m, p.weight + j));
        if (p.bias) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(m, p.bias + j));
        store(out, p.bf16_out, j, m, y);
    }
}

// The calling thread's row of fp32 scratch, kept across calls and grown to the widest row
// seen. A plain buffer, not a std::vector: this file is built with the AVX-512 flags, and the
// vector's out-of-line members would be emitted here as weak copies that the linker may pick
// for code built for older CPUs.
float *thread_row(int64_t cols) {
    struct Row {
        float *data = nullptr;
        int64_t size = 0;
        ~Row() { delete[] data; }
    };
    thread_local Row row;
    if (row.size < cols) {
        float *grown = new float[static_cast<size_t>(cols)];  // a throw leaves the old row in place
        delete[] row.data;
        row.data = grown;
        row.size = cols;
    }
    return row.data;
}

}  // namespace

void run(const Problem &p) {
    const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(p.cols, 1));
    at::parallel_for(0, p.rows, grain, [&](int64_t begin, int64_t end) {
        float *s = thread_row(p.cols);
        for (int64_t r = begin; r < end; ++r) run_row(p, r, s);
    });
}

}  // namespace ipex::ops::layer_norm_kernel
