// The blocked attention kernel behind ipex::attention (attention_op.h): per batch entry and
// block of query rows, Q·Kᵀ for a block of keys, scale, mask, bias and causal limit, an online
// softmax (running row max and sum) and P·V accumulated in fp32; no [Lq, Lk] matrix is kept.
// bf16 operands multiply with AVX512-BF16 dot products (pairs of bf16, fp32 sums), fp32 ones
// with AVX-512 FMA. Key blocks that the mask, the bias or the causal limit remove entirely are
// skipped; a block of rows whose skipped scores could still weigh in is computed again in full.
#pragma once

#include <cstdint>

namespace ipex::ops::attention_kernel {

// A matrix of one batch entry: element (i, j) at data + offset[b] + i * row + j * col
// (elements of the operand's dtype).
struct Operand {
    const void *data = nullptr;
    const int64_t *offset = nullptr;  // per batch entry
    int64_t row = 0, col = 0;
};

struct Problem {
    bool bf16 = false;  // q, k, v and out are bf16 (else fp32)
    int64_t batch = 0, lq = 0, lk = 0, d = 0, dv = 0;
    Operand q, k, v;     // q [lq, d], k [lk, d], v [lk, dv]
    Operand bias;        // fp32 [lq, lk] added to the scores, or data == nullptr
    Operand mask;        // bool [lq, lk], or data == nullptr
    bool mask_keeps = false;  // mask true: the score stays (else: the score becomes `fill`)
    float fill = 0.f, scale = 1.f;
    bool causal = false;  // key j is hidden from query i when j > i + lk - lq
    void *out = nullptr;  // [lq, dv] rows of `out_row` elements, col stride 1
    const int64_t *out_offset = nullptr;
    int64_t out_row = 0;
};

// Whether this CPU runs the kernel for the dtype (AVX-512; AVX512-BF16 for bf16).
bool available(bool bf16);

// Runs the problem, parallel over batch entries x blocks of query rows. Call only when
// available(p.bf16).
void run(const Problem &p);

}  // namespace ipex::ops::attention_kernel
