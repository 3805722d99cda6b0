#include "ops/woq/woq_linear.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <string>
#include <vector>

#include "base/isa.h"
#include "base/scratch.h"
#include "ops/woq/woq_kernels.h"
#include "ops/woq/woq_layout.h"
#include "ops/onednn_utils.h"
#include "ops/op_errors.h"
#include "ops/primitive_cache.h"

namespace ipex::woq {
namespace {

std::atomic<bool> g_force_portable{false};

// Output channels per parallel task.
constexpr int64_t kGrainRows = 16;
// Output channels per chunk of the gemv kernels, handed out to the threads on demand: a thread
// that loses its core for a while (other processes) does not hold the others back.
constexpr int64_t kChunkRows = 64;

template <typename F>
void for_row_chunks(int64_t n, const F &fn, int64_t rows = kChunkRows) {
    const int64_t chunks = (n + rows - 1) / rows;
    std::atomic<int64_t> next{0};
    at::parallel_for(0, std::min<int64_t>(at::get_num_threads(), chunks), 1, [&](int64_t, int64_t) {
        for (int64_t c = next++; c < chunks; c = next++) fn(c * rows, std::min(n, (c + 1) * rows));
    });
}

kernels::WeightView view_of(const at::Tensor &qweight, const at::Tensor &scales, const at::Tensor &zeros, int64_t bits,
                            int64_t group_size, int64_t k) {
    kernels::WeightView w;
    w.qweight = qweight.data_ptr<uint8_t>();
    w.scales = scales.data_ptr<float>();
    w.zeros = zeros.data_ptr<float>();
    w.n = qweight.size(0);
    w.k = k;
    w.kp = padded_in_features(k);
    w.groups = k / group_size;
    w.group_size = group_size;
    w.bits = static_cast<int>(bits);
    return w;
}

bool use_simd(const kernels::WeightView &w) {
    return !g_force_portable.load() && w.block_aligned() && isa::avx512();
}

// The AVX2 kernels, where the AVX-512 ones cannot run.
bool use_avx2(const kernels::WeightView &w) {
    return !g_force_portable.load() && w.block_aligned() && !isa::avx512() && isa::avx2_fma();
}

// x [M, K] fp32 -> [M, Kp] zero padded.
at::Tensor pad_channels(const at::Tensor &x, int64_t kp) {
    if (x.size(1) == kp) return x.contiguous();
    return at::constant_pad_nd(x, {0, kp - x.size(1)}, 0);
}

at::Tensor gemv_f32(const kernels::WeightView &w, const at::Tensor &x2d) {
    const int64_t m = x2d.size(0);
    const at::Tensor x = pad_channels(x2d.to(at::kFloat), w.kp);
    const at::Tensor xsum = x.narrow(1, 0, w.k).reshape({m, w.groups, w.group_size}).sum(2).contiguous();
    at::Tensor out = at::empty({m, w.n}, at::kFloat);
    const kernels::GemvF32 a{x.data_ptr<float>(), xsum.data_ptr<float>(), m, out.data_ptr<float>(), w.n};
    const bool simd = use_simd(w), avx2 = use_avx2(w);
    for_row_chunks(w.n, [&](int64_t n0, int64_t n1) {
        if (simd) kernels::gemv_f32_avx512(w, a, n0, n1);
        else if (avx2) kernels::gemv_f32_avx2(w, a, n0, n1);
        else kernels::gemv_f32_ref(w, a, n0, n1);
    });
    return out;
}

at::Tensor gemv_s8(const kernels::WeightView &w, const at::Tensor &x2d) {
    const int64_t m = x2d.size(0);
    // One serial pass per row (a chain of ATen ops here cost more than a decode step's GEMV
    // of a small layer).
    const at::Tensor xf = x2d.to(at::kFloat).contiguous();
    const at::Tensor scale = at::empty({m}, at::kFloat), xq = at::empty({m, w.kp}, at::kChar),
                     xsum = at::empty({m, w.groups}, at::kInt);
    const kernels::QuantizeS8 q{xf.data_ptr<float>(), m, w.k, w.kp, w.group_size, xq.data_ptr<int8_t>(),
                                scale.data_ptr<float>(), xsum.data_ptr<int32_t>()};
    if (!g_force_portable.load() && isa::avx2_fma()) kernels::quantize_s8_avx2(q);
    else kernels::quantize_s8_ref(q);
    at::Tensor out = at::empty({m, w.n}, at::kFloat);
    const kernels::GemvS8 a{xq.data_ptr<int8_t>(), scale.data_ptr<float>(), xsum.data_ptr<int32_t>(), m,
                            out.data_ptr<float>(), w.n};
    // AVX-512 without VNNI has no int8 kernel of its own: the AVX2 one runs there.
    const bool simd = use_simd(w) && isa::avx512_vnni(),
               avx2 = !simd && !g_force_portable.load() && w.block_aligned() && isa::avx2_fma();
    for_row_chunks(w.n, [&](int64_t n0, int64_t n1) {
        if (simd) kernels::gemv_s8_avx512vnni(w, a, n0, n1);
        else if (avx2) kernels::gemv_s8_avx2(w, a, n0, n1);
        else kernels::gemv_s8_ref(w, a, n0, n1);
    });
    return out;
}

// out: float [m, n], contiguous (rows of a larger output are fine).
void gemv_bf16_into(const kernels::WeightView &w, const at::Tensor &x2d, const at::Tensor &out) {
    const int64_t m = x2d.size(0);
    at::Tensor x = pad_channels(x2d.to(at::kBFloat16), w.kp);
    const at::Tensor xsum =
        x.narrow(1, 0, w.k).to(at::kFloat).reshape({m, w.groups, w.group_size}).sum(2).contiguous();
    const bool paired = kernels::bf16_pair_order(w);
    if (paired)  // [pair, blk, q/2, q%2, e] -> [pair, q%2, q/2, blk, e]
        x = x.view({m, w.kp / 64, 2, 2, 2, 8}).permute({0, 1, 4, 3, 2, 5}).contiguous().view({m, w.kp});
    const kernels::GemvBF16 a{reinterpret_cast<const uint16_t *>(x.data_ptr<at::BFloat16>()), xsum.data_ptr<float>(),
                              m, out.data_ptr<float>(), w.n, paired};
    for_row_chunks(w.n, [&](int64_t n0, int64_t n1) { kernels::gemv_bf16_avx512(w, a, n0, n1); });
}

at::Tensor gemv_bf16(const kernels::WeightView &w, const at::Tensor &x2d) {
    at::Tensor out = at::empty({x2d.size(0), w.n}, at::kFloat);
    gemv_bf16_into(w, x2d, out);
    return out;
}

// The input of the large-batch kernels (woq_kernels.h's GemmBF16): x [m, k] as bf16
// channel-pair words [kp/2, mp] (in pair order when pair_order) and, when sums, the group sums
// of the bf16 x [groups, mp].
struct PackedRows {
    at::Tensor xp, xsum;
    int64_t m = 0, mp = 0;
    // The kernel's arguments over these rows, writing out (row stride ldo); exact weights take
    // the group sums.
    kernels::GemmBF16 args(float *out, int64_t ldo, bool exact) const {
        kernels::GemmBF16 a{reinterpret_cast<const uint32_t *>(xp.data_ptr<int32_t>()), m, mp, out, ldo};
        a.exact = exact;
        a.xsum = exact ? xsum.data_ptr<float>() : nullptr;
        return a;
    }
};

// One serial pass, 16 rows at a time (rounded to bf16 into a scratch block, then written pair
// by pair as 64-byte runs): as a chain of ATen ops this took several parallel regions, and on
// a shared machine each waits for a worker thread to be scheduled.
template <typename T>
void pack_rows(const T *x, int64_t k, int64_t kp, int64_t groups, bool pair_order, bool sums, PackedRows &p) {
    const int64_t gs = k / groups, pairs = kp / 2, m = p.m, mp = p.mp;
    uint32_t *xp = reinterpret_cast<uint32_t *>(p.xp.data_ptr<int32_t>());
    float *xsum = sums ? p.xsum.data_ptr<float>() : nullptr;
    // Source pair of each pair position within 64 channels (inverse of bf16_pair_order's map).
    std::array<int64_t, 32> src{};
    for (int64_t pos = 0; pos < 64; pos += 2) {
        const int64_t q = (pos % 32) / 16 * 2 + pos / 32;
        src[static_cast<size_t>(pos / 2)] = pair_order ? ((pos % 16) / 8 * 32 + q * 8 + pos % 8) / 2 : pos / 2;
    }
    std::vector<uint16_t> block(static_cast<size_t>(16 * kp));
    for (int64_t i0 = 0; i0 < mp; i0 += 16) {
        std::fill(block.begin(), block.end(), uint16_t(0));
        for (int64_t r = 0; r < 16 && i0 + r < m; ++r) {
            const T *row = x + (i0 + r) * k;
            uint16_t *dst = block.data() + r * kp;
            for (int64_t c = 0; c < k; ++c) dst[c] = c10::BFloat16(static_cast<float>(row[c])).x;
        }
        if (sums)
            for (int64_t r = 0; r < 16; ++r)
                for (int64_t g = 0; g < groups; ++g) {
                    float sum = 0;  // of bf16 values; padding rows give 0
                    const uint16_t *v = block.data() + r * kp + g * gs;
                    for (int64_t c = 0; c < gs; ++c) sum += static_cast<float>(c10::BFloat16(v[c], c10::BFloat16::from_bits()));
                    xsum[g * mp + i0 + r] = sum;
                }
        const uint32_t *words = reinterpret_cast<const uint32_t *>(block.data());
        for (int64_t q = 0; q < pairs; ++q) {
            const int64_t from = pair_order ? q / 32 * 32 + src[static_cast<size_t>(q % 32)] : q;
            uint32_t *dst = xp + q * mp + i0;
            for (int64_t r = 0; r < 16; ++r) dst[r] = words[r * pairs + from];
        }
    }
}

PackedRows pack_gemm_input(const at::Tensor &x2d, int64_t k, int64_t kp, int64_t groups, bool pair_order, bool sums) {
    PackedRows p;
    p.m = x2d.size(0);
    p.mp = kernels::gemm_padded_rows(p.m);
    const at::Tensor x = x2d.scalar_type() == at::kBFloat16 ? x2d.contiguous() : x2d.to(at::kFloat).contiguous();
    p.xp = at::empty({kp / 2, p.mp}, at::kInt);
    p.xsum = at::empty({sums ? groups : 0, p.mp}, at::kFloat);
    if (x.scalar_type() == at::kBFloat16) pack_rows(x.data_ptr<at::BFloat16>(), k, kp, groups, pair_order, sums, p);
    else pack_rows(x.data_ptr<float>(), k, kp, groups, pair_order, sums, p);
    return p;
}

// Large batches in bf16 on AVX512-BF16: x packed once into channel pairs, then each thread
// expands chunks of its output channels in cache and multiplies them with all rows.
void fused_gemm_bf16_into(const kernels::WeightView &w, const at::Tensor &x2d, const at::Tensor &out) {
    const bool exact = kernels::gemm_exact_weights(w);
    const PackedRows x = pack_gemm_input(x2d, w.k, w.kp, w.groups, exact, exact);
    const kernels::GemmBF16 a = x.args(out.data_ptr<float>(), w.n, exact);
    for_row_chunks(w.n, [&](int64_t n0, int64_t n1) { kernels::gemm_bf16_avx512(w, a, n0, n1); }, kernels::kGemmPanelRows);
}

at::Tensor fused_gemm_bf16(const kernels::WeightView &w, const at::Tensor &x2d) {
    const int64_t m = x2d.size(0), tail = m % 16;
    at::Tensor out = at::empty({m, w.n}, at::kFloat);
    if (tail == 0 || tail > kernels::kGemmTailRows || m < 16 || !kernels::gemm_exact_weights(w)) {
        fused_gemm_bf16_into(w, x2d, out);
        return out;
    }
    fused_gemm_bf16_into(w, x2d.narrow(0, 0, m - tail), out.narrow(0, 0, m - tail));
    gemv_bf16_into(w, x2d.narrow(0, m - tail, tail), out.narrow(0, m - tail, tail));
    return out;
}

// Output channels dequantized per block of the large-batch path, per thread: about 2 MiB of
// weights (measured best on Zen 4 among 0.5-4 MiB), fewer oneDNN calls than L2-sized blocks
// and still read back from cache.
int64_t block_rows(int64_t k, int64_t elem) {
    constexpr int64_t kBlockBytes = int64_t(2048) << 10;
    const int64_t rows = kBlockBytes / (elem * k) / 16 * 16;
    return std::max<int64_t>(16, std::min<int64_t>(1024, rows));
}

// Buffers of the large-batch path, kept per thread between calls: fresh megabyte buffers would
// be page-faulted and zeroed by the kernel on every call.
void *reusable_buffer(size_t slot, int64_t bytes) {
    thread_local std::array<ScratchBuffer, 2> buffers;
    return buffers.at(slot).bytes(static_cast<size_t>(bytes));
}

// oneDNN matmul dst[rows, M] (fp32) = block[rows, K] x x[M, K]^T. The weight block is the
// matmul's source, which oneDNN reads as it is; only the small x is packed per call. Built on
// the ops runtime layer: primitives cached per shape, the calling thread's stream and scratchpad.
struct BlockMatmul {
    dnnl::primitive primitive;
    dnnl::memory::desc scratchpad;
};

std::shared_ptr<const BlockMatmul> block_matmul(int64_t m, int64_t k, int64_t rows, dnnl::memory::data_type dt) {
    static ops::PrimitiveCache<BlockMatmul, 64> cache;
    const ops::CacheKey key{m, k, rows, static_cast<int64_t>(dt)};
    if (auto hit = cache.find(key)) return hit;
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::desc src({rows, k}, dt, tag::ab);
    const dnnl::memory::desc wei({k, m}, dt, tag::ba);
    const dnnl::memory::desc dst({rows, m}, dnnl::memory::data_type::f32, tag::ab);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, wei, dst), attr, ops::cpu_engine());
    auto entry = std::make_shared<BlockMatmul>(BlockMatmul{dnnl::matmul(pd), pd.scratchpad_desc()});
    cache.put(key, entry);
    return entry;
}

// Large batches: blocks of output channels are dequantized in turn (bf16, or fp32 in fp32
// mode; the rows of a block spread over the threads) and multiplied with oneDNN's matmul
// (itself parallel). A block is about half a megabyte per thread, so it is still in cache
// when the matmul reads it.
at::Tensor blocked_matmul(const kernels::WeightView &w, const at::Tensor &x2d, bool fp32) {
    using tag = dnnl::memory::format_tag;
    const at::ScalarType dtype = fp32 ? at::kFloat : at::kBFloat16;
    const auto dt = fp32 ? dnnl::memory::data_type::f32 : dnnl::memory::data_type::bf16;
    const at::Tensor x = x2d.to(dtype).contiguous();
    const int64_t m = x.size(0);
    at::Tensor out = at::empty({m, w.n}, at::kFloat);
    const int64_t threads = std::max(1, at::get_num_threads());
    const int64_t rows = std::min(w.n, block_rows(w.k, fp32 ? 4 : 2) * threads), blocks = (w.n + rows - 1) / rows;
    const int64_t tail = w.n - (blocks - 1) * rows;
    const auto full = block_matmul(m, w.k, rows, dt);
    const auto last = block_matmul(m, w.k, tail, dt);
    const int64_t elem = fp32 ? 4 : 2;
    void *buf = reusable_buffer(0, rows * w.k * elem);
    const at::Tensor part = at::from_blob(reusable_buffer(1, rows * m * 4), {rows, m}, at::kFloat);
    const bool simd = use_simd(w) && (fp32 || isa::avx512_bf16()), avx2 = fp32 && use_avx2(w);
    dnnl::memory xt({{w.k, m}, dt, tag::ba}, ops::cpu_engine(), x.data_ptr());
    for (int64_t b = 0; b < blocks; ++b) {
        const int64_t n0 = b * rows, n1 = std::min(w.n, n0 + rows), nb = n1 - n0;
        at::parallel_for(n0, n1, kGrainRows, [&](int64_t r0, int64_t r1) {
            if (fp32) {
                float *dst = static_cast<float *>(buf) + (r0 - n0) * w.k;
                if (simd) kernels::dequant_f32_avx512(w, dst, w.k, r0, r1);
                else if (avx2) kernels::dequant_f32_avx2(w, dst, w.k, r0, r1);
                else kernels::dequant_f32_ref(w, dst, w.k, r0, r1);
            } else {
                uint16_t *dst = static_cast<uint16_t *>(buf) + (r0 - n0) * w.k;
                if (simd) kernels::dequant_bf16_avx512(w, dst, w.k, r0, r1);
                else kernels::dequant_bf16_ref(w, dst, w.k, r0, r1);
            }
        });
        const BlockMatmul &mm = nb == rows ? *full : *last;
        dnnl::memory wb({{nb, w.k}, dt, tag::ab}, ops::cpu_engine(), buf);
        dnnl::memory dst({{nb, m}, dnnl::memory::data_type::f32, tag::ab}, ops::cpu_engine(), part.data_ptr());
        ops::execute(mm.primitive, mm.scratchpad, {{DNNL_ARG_SRC, wb}, {DNNL_ARG_WEIGHTS, xt}, {DNNL_ARG_DST, dst}});
        out.narrow(1, n0, nb).copy_(part.narrow(0, 0, nb).t());
    }
    return out;
}

}  // namespace

void set_force_portable_kernels(bool on) { g_force_portable = on; }

void tiled_int4_gemm(const kernels::TiledInt4View &w, const at::Tensor &x2d, float *out, int64_t ldo) {
    TORCH_INTERNAL_ASSERT(isa::avx512_bf16() && w.k % kernels::kTiledUnit == 0 && x2d.dim() == 2 && x2d.size(1) == w.k,
                          "tiled_int4_gemm: needs AVX512-BF16 and x [m, ", w.k, "]");
    const bool exact = kernels::tiled_exact(w);
    const PackedRows x = pack_gemm_input(x2d, w.k, w.k, w.groups, /*pair_order=*/false, /*sums=*/exact);
    const kernels::GemmBF16 a = x.args(out, ldo, exact);
    for_row_chunks(w.n, [&](int64_t n0, int64_t n1) { kernels::gemm_bf16_tiled_avx512(w, a, n0, n1); },
                   kernels::kGemmPanelRows);
}

void tiled_int4_gemm_s8(const kernels::TiledInt4View &w, const at::Tensor &x2d, float *out, int64_t ldo) {
    TORCH_INTERNAL_ASSERT(isa::avx512_vnni() && w.k % kernels::kTiledUnit == 0 && x2d.dim() == 2 && x2d.size(1) == w.k,
                          "tiled_int4_gemm_s8: needs AVX-512 VNNI and x [m, ", w.k, "]");
    const at::Tensor x = x2d.scalar_type() == at::kBFloat16 ? x2d.contiguous() : x2d.to(at::kFloat).contiguous();
    kernels::QuantizeTiledS8 q;
    q.m = x.size(0);
    q.k = w.k;
    q.piece = kernels::tiled_piece(w);
    q.mp = kernels::gemm_padded_rows(q.m);
    q.sums = !w.integer_zeros;
    if (x.scalar_type() == at::kBFloat16) q.xb = reinterpret_cast<const uint16_t *>(x.data_ptr<at::BFloat16>());
    else q.xf = x.data_ptr<float>();
    const at::Tensor xq = at::empty({w.k / 4, q.mp}, at::kInt),
                     xscale = at::empty({w.k / kernels::kTiledUnit, q.mp}, at::kFloat),
                     xsum = at::empty({w.k / q.piece, q.mp}, at::kFloat);
    q.xq = reinterpret_cast<uint32_t *>(xq.data_ptr<int32_t>());
    q.xscale = xscale.data_ptr<float>();
    q.xsum = xsum.data_ptr<float>();
    at::parallel_for(0, q.mp / 16, 1, [&](int64_t b0, int64_t b1) { kernels::quantize_tiled_s8_avx512(q, b0, b1); });
    const kernels::GemmS8Tiled a{q.xq, q.xscale, q.xsum, q.m, q.mp, out, ldo};
    const int64_t scratch = kernels::gemm_s8_tiled_scratch_bytes(w.k);
    for_row_chunks(
        w.n,
        [&](int64_t n0, int64_t n1) {
            thread_local ScratchBuffer buf;
            kernels::gemm_s8_tiled_avx512vnni(w, a, n0, n1, buf.bytes(static_cast<size_t>(scratch)));
        },
        kernels::kGemmS8PanelRows);
}

at::Tensor woq_linear(const at::Tensor &input, const at::Tensor &qweight, const at::Tensor &scales,
                      const at::Tensor &zeros, const c10::optional<at::Tensor> &bias,
                      const c10::optional<at::Tensor> &perm, int64_t bits, int64_t group_size, int64_t in_features,
                      c10::string_view lowp_mode) {
    const std::string mode(lowp_mode);
    IPEX_CHECK_INPUT(mode == "fp32" || mode == "bf16" || mode == "int8", "ipex::woq_linear: lowp_mode must be fp32, bf16 or int8, got ",
                mode);
    IPEX_CHECK_INPUT(bits == 4 || bits == 8, "ipex::woq_linear: bits must be 4 or 8, got ", bits);
    const int64_t k = in_features;
    IPEX_CHECK_INPUT(k > 0 && group_size > 0 && k % group_size == 0, "ipex::woq_linear: group_size ", group_size,
                " must divide in_features ", k);
    IPEX_CHECK_INPUT(at::isFloatingType(input.scalar_type()) && input.dim() >= 1 && input.size(-1) == k,
                "ipex::woq_linear: input must be a float tensor [..., ", k, "], got ", input.sizes());
    IPEX_CHECK_INPUT(qweight.scalar_type() == at::kByte && qweight.dim() == 2 && qweight.is_contiguous() &&
                    qweight.size(1) == packed_row_bytes(k, static_cast<int>(bits)),
                "ipex::woq_linear: qweight must be contiguous uint8 [N, ", packed_row_bytes(k, static_cast<int>(bits)),
                "], got ", qweight.sizes());
    const int64_t n = qweight.size(0), groups = k / group_size;
    for (const at::Tensor *t : {&scales, &zeros})
        IPEX_CHECK_INPUT(t->scalar_type() == at::kFloat && t->is_contiguous() && t->sizes() == at::IntArrayRef({n, groups}),
                    "ipex::woq_linear: scales and zeros must be contiguous float [", n, ", ", groups, "], got ",
                    t->sizes());
    if (bias && bias->defined())
        IPEX_CHECK_INPUT(bias->dim() == 1 && bias->size(0) == n, "ipex::woq_linear: bias must have ", n, " elements");
    if (perm && perm->defined())
        IPEX_CHECK_INPUT(perm->scalar_type() == at::kLong && perm->dim() == 1 && perm->size(0) == k,
                    "ipex::woq_linear: perm must be int64 [", k, "]");
    if (perm && perm->defined() && k > 0) {
        const auto range = at::aminmax(*perm);
        IPEX_CHECK_INPUT(std::get<0>(range).item<int64_t>() >= 0 && std::get<1>(range).item<int64_t>() < k,
                         "ipex::woq_linear: perm holds an index outside [0, ", k, ")");
    }

    const kernels::WeightView w = view_of(qweight, scales, zeros, bits, group_size, k);
    at::Tensor x2d = input.reshape({-1, k});
    if (perm && perm->defined()) x2d = x2d.index_select(1, *perm);
    const int64_t m = x2d.size(0);
    at::Tensor out;
    if (m >= kMatmulRows && mode != "fp32" && use_simd(w) && isa::avx512_bf16() && !isa::amx_bf16_present()) {
        out = fused_gemm_bf16(w, x2d);
    } else if (m >= kMatmulRows) {
        // oneDNN has bf16 matmuls from AVX-512 on; below that the blocks run in fp32.
        static const bool bf16_matmul = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
        out = blocked_matmul(w, x2d, mode == "fp32" || !bf16_matmul);
    } else if (mode == "fp32") {
        out = gemv_f32(w, x2d);
    } else if (mode == "int8") {
        out = gemv_s8(w, x2d);
    } else if (bits == 4 && use_simd(w) && isa::avx512_bf16()) {
        out = gemv_bf16(w, x2d);
    } else {
        out = gemv_f32(w, x2d.to(at::kBFloat16));
    }
    if (bias && bias->defined()) out.add_(bias->to(at::kFloat));
    std::vector<int64_t> shape = input.sizes().vec();
    shape.back() = n;
    return out.to(input.scalar_type()).reshape(shape);
}

}  // namespace ipex::woq

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    m.def("woq_linear(Tensor input, Tensor qweight, Tensor scales, Tensor zeros, Tensor? bias, Tensor? perm, "
          "int bits, int group_size, int in_features, str lowp_mode) -> Tensor");
}

TORCH_LIBRARY_IMPL(ipex, CPU, m) { m.impl("woq_linear", TORCH_FN(IPEX_GUARDED(ipex::woq::woq_linear))); }
