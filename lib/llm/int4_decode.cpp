#include "llm/int4_decode.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "base/isa.h"
#include "base/scratch.h"
#include "llm/kernels.h"
#include "ops/woq/woq_kernels.h"
#include "ops/woq/woq_layout.h"
#include "ops/woq/woq_linear.h"

namespace ipex::llm {

namespace {

using ::ipex::kernels::from_bf16;  // kernels/bf16.h
using ::ipex::kernels::to_bf16;

// A scale fp16 holds within 2^-11 of itself: inside its normal range.
bool fp16_normal(float s) { return s >= 6.1035156e-05f && s <= 65504.f; }

}  // namespace

bool Int4Decode::takes(int64_t k, int64_t group_size, bool int8_activations) {
    if (!kernels::avx512_ok() || !isa::avx512_bf16() || (int8_activations && !isa::avx512_vnni())) return false;
    // Groups of whole units, or of one, two or four of a unit's 32-channel dot-product blocks.
    const bool group_fits = group_size > 0 && (group_size % kUnit == 0 || group_size == 32 || group_size == 64);
    return k > 0 && k % kUnit == 0 && group_fits && k % group_size == 0;
}

std::unique_ptr<Int4Decode> Int4Decode::allocate(int64_t n, int64_t k, int64_t group_size, bool int8_activations,
                                                 bool integer_zeros) {
    auto d = std::unique_ptr<Int4Decode>(new Int4Decode());
    d->n_ = n;
    d->k_ = k;
    d->group_size_ = group_size;
    d->groups_ = k / group_size;
    d->tiles_ = (n + kTileRows - 1) / kTileRows;
    d->int8_ = int8_activations;
    d->integer_zeros_ = integer_zeros;
    const int64_t units = k / kUnit;
    d->data_bytes_ = static_cast<size_t>(d->tiles_ * units * kTileRows * 64);
    d->data_.reset(new uint8_t[d->data_bytes_]);  // uninitialized
    const int64_t used = n - (d->tiles_ - 1) * kTileRows;  // rows of the last tile
    for (int64_t u = 0; u < units && used < kTileRows; ++u)
        std::memset(d->data_.get() + (((d->tiles_ - 1) * units + u) * kTileRows + used) * 64, 0,
                    static_cast<size_t>((kTileRows - used) * 64));
    d->scales_.assign(static_cast<size_t>(d->tiles_ * d->groups_ * kTileRows), 0);
    d->zeros_.assign(d->scales_.size(), 0);
    return d;
}

std::unique_ptr<Int4Decode> Int4Decode::build(const woq::WoqLayer &layer, bool int8_activations) {
    const int64_t k = layer.in_features, n = layer.out_features, gs = layer.group_size;
    if (layer.bits != 4 || layer.perm.defined() || !takes(k, gs, int8_activations)) return nullptr;
    const at::Tensor scales = layer.scales.to(at::kFloat).contiguous(), zeros = layer.zeros.to(at::kFloat).contiguous();
    const float *sv = scales.data_ptr<float>(), *zv = zeros.data_ptr<float>();
    // fp16 holds the scales within 2^-11 of themselves (exactly where the checkpoint stored
    // them in fp16) inside its normal range, and zero points of up to 1024 within 2^-11 of one
    // step (integers exactly). The int8 kernel subtracts integer zero points in -112..127 from
    // the codes exactly; other zero points cost it a correction per piece.
    bool integer_zeros = true;
    for (int64_t i = 0; i < scales.numel(); ++i) {
        const float s = std::fabs(sv[i]), z = zv[i];
        if ((s != 0.f && !fp16_normal(s)) || !(std::fabs(z) <= 1024.f)) return nullptr;
        integer_zeros = integer_zeros && z == std::nearbyint(z) && z >= -112.f && z <= 127.f;
    }
    auto d = allocate(n, k, gs, int8_activations, integer_zeros);
    const at::Tensor packed = layer.qweight.contiguous();  // lib/woq's layout: K / 2 bytes a row
    const uint8_t *qv = packed.data_ptr<uint8_t>();
    const int64_t units = k / kUnit, row_bytes = packed.size(1);
    TORCH_INTERNAL_ASSERT(packed.dim() == 2 && packed.size(0) == n && row_bytes == woq::packed_row_bytes(k, 4),
                          "Int4Decode::build: a packed int4 row of ", k, " channels, got ", packed.sizes());
    at::parallel_for(0, d->tiles_, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
            for (int64_t r = 0; r < kTileRows; ++r) {
                const int64_t row = t * kTileRows + r;
                if (row >= n) break;
                kernels::int4_tile_row_from_packed_avx512(qv + row * row_bytes, k,
                                                          d->data_.get() + (t * units * kTileRows + r) * 64,
                                                          kTileRows * 64);
                for (int64_t g = 0; g < d->groups_; ++g) {
                    const size_t at = static_cast<size_t>((t * d->groups_ + g) * kTileRows + r);
                    d->scales_[at] = c10::Half(sv[row * d->groups_ + g]).x;
                    d->zeros_[at] = c10::Half(zv[row * d->groups_ + g]).x;
                }
            }
    });
    return d;
}

std::unique_ptr<Int4Decode> Int4Decode::quantize(const std::vector<at::Tensor> &parts, int64_t group_size,
                                                 bool int8_activations) {
    const int64_t k = !parts.empty() && parts[0].dim() == 2 ? parts[0].size(1) : 0;
    const int64_t gs = group_size == -1 ? k : group_size;
    if (!takes(k, gs, int8_activations)) return nullptr;
    std::vector<at::Tensor> w;  // contiguous, bf16 / fp16 / fp32
    std::vector<int64_t> first;  // each part's first row
    int64_t n = 0;
    for (const at::Tensor &p : parts) {
        if (p.dim() != 2 || p.size(1) != k) return nullptr;
        const at::ScalarType t = p.scalar_type();
        w.push_back(t == at::kBFloat16 || t == at::kHalf || t == at::kFloat ? p.contiguous() : p.to(at::kFloat).contiguous());
        first.push_back(n);
        n += p.size(0);
    }
    if (n == 0) return nullptr;
    auto d = allocate(n, k, gs, int8_activations, /*integer_zeros=*/true);  // zero points 0..15
    const int64_t units = k / kUnit, groups = d->groups_;
    std::atomic<bool> ok{true};
    at::parallel_for(0, d->tiles_, 1, [&](int64_t t0, int64_t t1) {
        thread_local ScratchBuffer codes;  // a row's codes
        uint8_t *q = codes.get<uint8_t>(static_cast<size_t>(k));
        for (int64_t t = t0; t < t1 && ok.load(std::memory_order_relaxed); ++t)
            for (int64_t r = 0; r < kTileRows && t * kTileRows + r < n; ++r) {
                const int64_t row = t * kTileRows + r;
                const size_t p = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), row) - first.begin() - 1);
                const at::ScalarType type = w[p].scalar_type();
                const auto *src = static_cast<const char *>(w[p].data_ptr()) + (row - first[p]) * k * w[p].element_size();
                const kernels::QuantizeSource kind = type == at::kFloat  ? kernels::QuantizeSource::f32
                                                     : type == at::kHalf ? kernels::QuantizeSource::f16
                                                                         : kernels::QuantizeSource::bf16;
                uint8_t *dst = d->data_.get() + (t * units * kTileRows + r) * 64;
                const size_t meta = static_cast<size_t>(t * groups * kTileRows + r);
                // Scales outside fp16's normal range: build keeps the lib/woq form, and so does this.
                if (!kernels::int4_quantize_row_avx512(src, kind, k, gs, q, dst, kTileRows * 64, d->scales_.data() + meta,
                                                       d->zeros_.data() + meta, kTileRows)) {
                    ok = false;
                    return;
                }
            }
    });
    if (!ok) return nullptr;
    return d;
}

static_assert(Int4Decode::kTileRows == woq::kernels::kTiledRows && Int4Decode::kUnit == woq::kernels::kTiledUnit,
              "Int4Decode builds lib/woq's tiled layout");

void Int4Decode::run(const at::Tensor &x, float *out, int64_t ldo) const {
    TORCH_CHECK(x.dim() == 2 && x.size(1) == k_, "Int4Decode: x must be [rows, ", k_, "], got ", x.sizes());
    const int64_t m = x.size(0);
    if (m <= kMaxRows) {
        decode(x, out, ldo);
        return;
    }
    const int64_t tail = m % 16, full = tail <= kGemmTailRows ? m - tail : m;
    if (int8_) woq::tiled_int4_gemm_s8(view(), x.narrow(0, 0, full), out, ldo);
    else woq::tiled_int4_gemm(view(), x.narrow(0, 0, full), out, ldo);
    if (full < m) decode(x.narrow(0, full, m - full), out + full * ldo, ldo);
}

woq::kernels::TiledInt4View Int4Decode::view() const {
    woq::kernels::TiledInt4View w{data_.get(), scales_.data(), zeros_.data(), n_, k_, groups_, group_size_};
    w.integer_zeros = integer_zeros_;
    return w;
}

void Int4Decode::prepare(const at::Tensor &x, std::vector<uint16_t> &xb, std::vector<float> &xsum) const {
    TORCH_CHECK(x.dim() == 2 && x.size(1) == k_ && x.size(0) <= kMaxRows, "Int4Decode: a step takes up to ",
                kMaxRows, " rows of ", k_, " channels, got ", x.sizes());
    const int64_t m = x.size(0);
    xb.resize(static_cast<size_t>(m * k_));
    xsum.resize(static_cast<size_t>(m * groups_));
    const at::Tensor xc = x.contiguous();
    if (xc.scalar_type() == at::kBFloat16) {
        std::memcpy(xb.data(), xc.data_ptr<at::BFloat16>(), xb.size() * 2);
    } else {
        const at::Tensor xf = xc.scalar_type() == at::kFloat ? xc : xc.to(at::kFloat);
        const float *src = xf.data_ptr<float>();
        for (size_t i = 0; i < xb.size(); ++i) xb[i] = to_bf16(src[i]);
    }
    for (int64_t g = 0; g < m * groups_; ++g) {
        const uint16_t *v = xb.data() + g * group_size_;
        float sum = 0.f;
        for (int64_t c = 0; c < group_size_; ++c) sum += from_bf16(v[c]);
        xsum[static_cast<size_t>(g)] = sum;
    }
}

kernels::Int4DecodeArgs Int4Decode::args(const uint16_t *xb, const float *xsum, int64_t m, float *out,
                                         int64_t ldo) const {
    return {data_.get(), scales_.data(), zeros_.data(), k_, groups_, group_size_, xb, xsum, m, out, ldo, n_, nullptr};
}

void Int4Decode::decode(const at::Tensor &x, float *out, int64_t ldo) const { decode_jobs({{this, x, out, ldo}}); }

void Int4Decode::decode_jobs(const std::vector<Job> &jobs) {
    // Inputs kept per thread between steps: no allocation per token once sized.
    thread_local std::vector<std::vector<uint16_t>> xbs;
    thread_local std::vector<std::vector<float>> xsums;
    if (xbs.size() < jobs.size()) {
        xbs.resize(jobs.size());
        xsums.resize(jobs.size());
    }
    std::vector<kernels::Int4DecodeArgs> a;
    std::vector<int64_t> first(jobs.size() + 1, 0);  // the jobs' tiles, one after another
    int64_t groups = 0;
    for (size_t j = 0; j < jobs.size(); ++j) {
        const Job &job = jobs[j];
        const Int4Decode &w = *job.w;
        size_t from = j;
        for (size_t i = 0; i < j && from == j; ++i)
            if (jobs[i].x.is_same(job.x) && jobs[i].w->k_ == w.k_ && jobs[i].w->group_size_ == w.group_size_) from = i;
        if (from == j) w.prepare(job.x, xbs[j], xsums[j]);
        a.push_back(w.args(xbs[from].data(), xsums[from].data(), job.x.size(0), job.out, job.ldo));
        first[j + 1] = first[j] + w.tiles_;
        groups = std::max(groups, w.groups_);
    }
    const int64_t tiles = first.back();
    const int64_t grain = std::max<int64_t>(1, tiles / (4 * at::get_num_threads()));
    at::parallel_for(0, tiles, grain, [&](int64_t t0, int64_t t1) {
        thread_local ScratchBuffer scratch;
        float *s = scratch.get<float>(static_cast<size_t>(2 * groups * kTileRows));
        for (size_t j = 0; j < jobs.size(); ++j) {
            const int64_t lo = std::max(t0, first[j]), hi = std::min(t1, first[j + 1]);
            if (lo >= hi) continue;
            kernels::Int4DecodeArgs job = a[j];
            job.scratch = s;
            kernels::int4_decode_avx512(job, lo - first[j], hi - first[j]);
        }
    });
}

}  // namespace ipex::llm
