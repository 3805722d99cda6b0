// The raw AVX512-BF16 GEMV of Bf16Decode (bf16_decode_avx512.cpp), declared without libtorch
// or standard library types: that file is built with ISA target attributes and includes
// nothing whose inline functions could be shared with code built for older CPUs.
#pragma once

#include <cstdint>

namespace ipex::llm::kernels {

// Parts of the weight a call may read from: a merged projection held as separate tensors
// (q/k/v stored apart in the checkpoint and read in place from its mapping).
constexpr int kMaxWeightParts = 4;

struct Bf16GemvArgs {
    // bf16 [N, K] as parts stacked along N, rows of ldw: rows [end[p-1], end[p]) are part p's,
    // from w[p] (end[-1] = 0); one part: w[0] and end[0] = N.
    const uint16_t *w[kMaxWeightParts];
    int64_t end[kMaxWeightParts];
    int parts;
    int64_t k, ldw;
    const uint16_t *x;        // bf16 [m, K] rows of ldx, readable (zero) up to K rounded up to 32
    int64_t ldx, m;           // m in 1..8
    const float *bias;        // [N] or null
    const float *residual;    // [m, N] rows of ldr, or null (not with silu_mul)
    int64_t ldr;
    float *out;               // rows of ldo
    int64_t ldo;
    int64_t up_offset;        // 0: plain product; else out[i] = silu(row i) * row (i + up_offset)
};

// Output columns [n0, n1) (with up_offset: gate rows [n0, n1) and their up rows).
void bf16_gemv_avx512(const Bf16GemvArgs &a, int64_t n0, int64_t n1);

}  // namespace ipex::llm::kernels
