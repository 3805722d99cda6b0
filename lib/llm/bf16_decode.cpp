#include "llm/bf16_decode.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/cpu_features.h"
#include "llm/kernels.h"

namespace ipex::llm {
namespace {

constexpr int64_t kChannelStep = 32;  // input channels per kernel step (one bf16 vector)
// Output rows below which one thread does all of a call (forking costs more than it saves).
constexpr int64_t kMinRowsPerThread = 64;

}  // namespace

bool Bf16Decode::usable() {
    const CpuFeatures &f = cpu_features();
    return kernels::avx512_ok() && f.os_avx512 && f.avx512bw && f.avx512vl && f.avx512_bf16;
}

Bf16Decode::Bf16Decode(at::Tensor weight, at::Tensor bias)
    : Bf16Decode(std::vector<at::Tensor>{std::move(weight)}, std::move(bias)) {}

Bf16Decode::Bf16Decode(std::vector<at::Tensor> parts, at::Tensor bias) : parts_(std::move(parts)), bias_(std::move(bias)) {
    TORCH_INTERNAL_ASSERT(!parts_.empty() && parts_.size() <= static_cast<size_t>(kernels::kMaxWeightParts),
                          "Bf16Decode: 1 to ", kernels::kMaxWeightParts, " weight parts, got ", parts_.size());
    for (const at::Tensor &w : parts_) {
        TORCH_INTERNAL_ASSERT(w.dim() == 2 && w.scalar_type() == at::kBFloat16 && w.is_contiguous() &&
                                  w.size(1) == parts_[0].size(1),
                              "Bf16Decode: every part must be a contiguous bf16 [N_p, K] of one K");
        n_ += w.size(0);
    }
    k_ = parts_[0].size(1);
    TORCH_INTERNAL_ASSERT(!bias_.defined() || (bias_.scalar_type() == at::kFloat && bias_.is_contiguous() &&
                                                bias_.numel() == n_),
                          "Bf16Decode: the bias must be fp32 [N]");
}

kernels::Bf16GemvArgs Bf16Decode::weight_args(kernels::Bf16GemvArgs args) const {
    int64_t end = 0;
    for (size_t p = 0; p < parts_.size(); ++p) {
        args.w[p] = reinterpret_cast<const uint16_t *>(parts_[p].data_ptr<at::BFloat16>());
        args.end[p] = end += parts_[p].size(0);
    }
    args.parts = static_cast<int>(parts_.size());
    args.k = k_;
    args.ldw = k_;
    args.bias = bias_.defined() ? bias_.data_ptr<float>() : nullptr;
    return args;
}

void Bf16Decode::prepare(const at::Tensor &x, std::vector<uint16_t> &xb, kernels::Bf16GemvArgs &args) const {
    const int64_t m = x.size(0);
    TORCH_CHECK(x.dim() == 2 && m >= 1 && m <= kMaxRows && x.size(1) == k_, "Bf16Decode: x must be [1..8, ", k_,
                "], got ", x.sizes());
    const int64_t ldx = (k_ + kChannelStep - 1) / kChannelStep * kChannelStep;
    xb.resize(static_cast<size_t>(m * ldx));
    const at::Tensor xc = x.scalar_type() == at::kBFloat16 ? x.contiguous() : x.to(at::kFloat).contiguous();
    for (int64_t r = 0; r < m; ++r) {
        uint16_t *dst = xb.data() + r * ldx;
        if (xc.scalar_type() == at::kBFloat16) {
            std::memcpy(dst, xc.data_ptr<at::BFloat16>() + r * k_, static_cast<size_t>(k_) * 2);
        } else {
            const float *src = xc.data_ptr<float>() + r * k_;
            for (int64_t c = 0; c < k_; ++c) dst[c] = kernels::to_bf16(src[c]);
        }
        std::fill(dst + k_, dst + ldx, uint16_t{0});
    }
    args.x = xb.data();
    args.ldx = ldx;
    args.m = m;
}

void Bf16Decode::launch(const at::Tensor &x, kernels::Bf16GemvArgs args, int64_t rows) const {
    thread_local std::vector<uint16_t> xb;  // scratch reused across calls
    args = weight_args(args);
    prepare(x, xb, args);
    // One contiguous stretch of rows per thread: at::parallel_for hands out equal chunks.
    at::parallel_for(0, rows, kMinRowsPerThread, [&](int64_t n0, int64_t n1) { kernels::bf16_gemv_avx512(args, n0, n1); });
}

void Bf16Decode::decode_jobs(const std::vector<Job> &jobs) {
    thread_local std::vector<std::vector<uint16_t>> xbs;  // kept between steps: no allocation per token
    if (xbs.size() < jobs.size()) xbs.resize(jobs.size());
    std::vector<kernels::Bf16GemvArgs> a;
    std::vector<int64_t> first(jobs.size() + 1, 0);  // the jobs' output rows, one after another
    for (size_t j = 0; j < jobs.size(); ++j) {
        const Job &job = jobs[j];
        kernels::Bf16GemvArgs args{};
        args.out = job.out;
        args.ldo = job.ldo;
        args = job.w->weight_args(args);
        size_t from = j;
        for (size_t i = 0; i < j && from == j; ++i)
            if (jobs[i].x.is_same(job.x) && jobs[i].w->k_ == job.w->k_) from = i;
        if (from == j) {
            job.w->prepare(job.x, xbs[j], args);
        } else {  // x as an earlier job prepared it
            args.x = a[from].x;
            args.ldx = a[from].ldx;
            args.m = a[from].m;
        }
        a.push_back(args);
        first[j + 1] = first[j] + job.w->n_;
    }
    at::parallel_for(0, first.back(), kMinRowsPerThread, [&](int64_t r0, int64_t r1) {
        for (size_t j = 0; j < jobs.size(); ++j) {
            const int64_t lo = std::max(r0, first[j]), hi = std::min(r1, first[j + 1]);
            if (lo < hi) kernels::bf16_gemv_avx512(a[j], lo - first[j], hi - first[j]);
        }
    });
}

void Bf16Decode::run(const at::Tensor &x, float *out, int64_t ldo, const float *residual, int64_t ldr) const {
    kernels::Bf16GemvArgs args{};
    args.residual = residual;
    args.ldr = ldr;
    args.out = out;
    args.ldo = ldo;
    launch(x, args, n_);
}

void Bf16Decode::run_silu_mul(const at::Tensor &x, float *out, int64_t ldo) const {
    TORCH_CHECK(n_ % 2 == 0, "Bf16Decode: a gate/up projection has an even number of outputs, got ", n_);
    kernels::Bf16GemvArgs args{};
    args.out = out;
    args.ldo = ldo;
    args.up_offset = n_ / 2;
    launch(x, args, n_ / 2);
}

}  // namespace ipex::llm
