#include "ops/matmul_op.h"

#include <c10/util/strides.h>
#include <torch/library.h>

#include <string>
#include <vector>

#include "ops/onednn_utils.h"
#include "ops/op_errors.h"
#include "ops/primitive_cache.h"

namespace ipex::ops {
namespace {

using dnnl::memory;

// Shapes a model runs matmuls with: every distinct (shape, stride) signature of every
// attention and hand-written matmul of a model, a few sequence lengths each.
constexpr size_t kMaxMatmulPrimitives = 256;

struct MatmulEntry {
    dnnl::matmul primitive;
    memory::desc src, weights, dst, scratchpad;
    bool dense = false;      // operands to copy to a dense layout first
    bool no_kernel = false;  // oneDNN has no kernel for the dtype here: `widened` for bf16, else at::matmul
    // bf16 without a oneDNN bf16 kernel: the fp32 primitive for the operands widened to fp32.
    std::shared_ptr<const MatmulEntry> widened;
};

PrimitiveCache<MatmulEntry, kMaxMatmulPrimitives> &cache() {
    static PrimitiveCache<MatmulEntry, kMaxMatmulPrimitives> primitives;
    return primitives;
}

// `t` viewed with `rank` dims (leading dims of size 1 added).
at::Tensor with_rank(const at::Tensor &t, int64_t rank) {
    std::vector<int64_t> sizes(rank - t.dim(), 1), strides(rank - t.dim(), 0);
    sizes.insert(sizes.end(), t.sizes().begin(), t.sizes().end());
    strides.insert(strides.end(), t.strides().begin(), t.strides().end());
    // Leading size-1 dims (and any other size-1 dim) take a stride oneDNN accepts.
    for (int64_t i = rank - 1; i >= 0; --i)
        if (sizes[i] == 1) strides[i] = i + 1 < rank ? strides[i + 1] * sizes[i + 1] : 1;
    return t.as_strided(sizes, strides);
}

// The tensor's strides, or (dense) those of a contiguous tensor of its sizes.
memory::desc desc_of(const at::Tensor &t, bool dense = false) {
    return memory::desc(to_dims(t.sizes()), to_dnnl(t.scalar_type()),
                        dense ? to_dims(c10::contiguous_strides(t.sizes())) : to_dims(t.strides()));
}

// The primitive for the operands' own strides; nullptr when oneDNN rejects them (an expanded
// dim) or would run them only with its reference code, far slower than a dense copy.
std::shared_ptr<const MatmulEntry> build(const at::Tensor &a, const at::Tensor &b, const std::vector<int64_t> &dst_sizes,
                                         bool dense) {
    auto entry = std::make_shared<MatmulEntry>();
    entry->src = desc_of(a, dense);
    entry->weights = desc_of(b, dense);
    entry->dst = memory::desc(to_dims(dst_sizes), to_dnnl(a.scalar_type()), to_dims(c10::contiguous_strides(dst_sizes)));
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    try {
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(entry->src, entry->weights, entry->dst), attr,
                                        cpu_engine());
        if (!dense && is_reference(pd)) return nullptr;
        entry->primitive = dnnl::matmul(pd);
        entry->scratchpad = pd.scratchpad_desc();
    } catch (const dnnl::error &) {
        return nullptr;  // none for this dtype on this CPU (bf16 without AVX512-BF16): aten computes it
    }
    entry->dense = dense;
    return entry;
}

// The entry for operands oneDNN has no kernel for (bf16 without AVX512-BF16): the fp32 primitive
// of the same values widened, whose result is rounded to bf16 once, as aten's bf16 matmul rounds
// its fp32 sums (aten's own bf16 loops run at ~1 GFLOP/s, oneDNN's fp32 kernel near the FMA peak).
// Another dtype (or none for fp32 either): at::matmul.
std::shared_ptr<const MatmulEntry> without_kernel(const at::Tensor &a, const at::Tensor &b,
                                                  const std::vector<int64_t> &dst_sizes) {
    auto entry = std::make_shared<MatmulEntry>();
    entry->no_kernel = true;
    if (a.scalar_type() == at::kBFloat16) {
        // The widened operands' strides follow from these operands' sizes and strides alone, so
        // one fp32 primitive serves every call under this entry's key: meta tensors give the
        // strides `to(kFloat)` will have, without converting any value.
        const auto widened_like = [](const at::Tensor &t) {
            return at::empty_like(t, t.options().dtype(at::kFloat).device(at::kMeta));
        };
        const at::Tensor a32 = widened_like(a), b32 = widened_like(b);
        entry->widened = build(a32, b32, dst_sizes, /*dense=*/false);
        if (!entry->widened) entry->widened = build(a32, b32, dst_sizes, /*dense=*/true);
    }
    return entry;
}

at::Tensor run(const MatmulEntry &entry, const at::Tensor &a, const at::Tensor &b, const std::vector<int64_t> &dst_sizes) {
    const at::Tensor dst = at::empty(dst_sizes, a.options());
    const at::Tensor src = entry.dense ? a.contiguous() : a;
    const at::Tensor weights = entry.dense ? b.contiguous() : b;
    execute(entry.primitive, entry.scratchpad,
            {{DNNL_ARG_SRC, wrap(src, entry.src)},
             {DNNL_ARG_WEIGHTS, wrap(weights, entry.weights)},
             {DNNL_ARG_DST, wrap(dst, entry.dst)}});
    return dst;
}

void append(CacheKey &key, const at::Tensor &t) {
    key.insert(key.end(), t.sizes().begin(), t.sizes().end());
    key.insert(key.end(), t.strides().begin(), t.strides().end());
}

}  // namespace

at::Tensor matmul(const at::Tensor &self, const at::Tensor &other) {
    const at::ScalarType type = self.scalar_type();
    if (self.dim() < 2 || other.dim() < 2 || type != other.scalar_type() || !onednn_float(type) ||
        self.numel() == 0 || other.numel() == 0 || self.size(-1) == 0)
        return at::matmul(self, other);
    IPEX_CHECK_INPUT(self.size(-1) == other.size(-2), "ipex::matmul: shapes ", self.sizes(), " and ", other.sizes(),
                     " cannot be multiplied");
    const int64_t rank = std::max(self.dim(), other.dim());
    const at::Tensor a = with_rank(self, rank), b = with_rank(other, rank);
    std::vector<int64_t> dst_sizes(rank);
    for (int64_t i = 0; i < rank - 2; ++i) {
        IPEX_CHECK_INPUT(a.size(i) == b.size(i) || a.size(i) == 1 || b.size(i) == 1, "ipex::matmul: batch dims of ",
                         self.sizes(), " and ", other.sizes(), " do not broadcast");
        dst_sizes[i] = std::max(a.size(i), b.size(i));
    }
    dst_sizes[rank - 2] = a.size(-2);
    dst_sizes[rank - 1] = b.size(-1);
    CacheKey key{rank, static_cast<int64_t>(type)};
    append(key, a);
    append(key, b);
    std::shared_ptr<const MatmulEntry> entry = cache().find(key);
    if (!entry) {
        entry = build(a, b, dst_sizes, /*dense=*/false);
        if (!entry) entry = build(a, b, dst_sizes, /*dense=*/true);
        if (!entry) entry = without_kernel(a, b, dst_sizes);
        cache().put(key, entry);
    }
    if (entry->widened) return run(*entry->widened, a.to(at::kFloat), b.to(at::kFloat), dst_sizes).to(at::kBFloat16);
    if (entry->no_kernel) return at::matmul(self, other);
    return run(*entry, a, b, dst_sizes);
}

size_t matmul_cached_primitives() { return cache().size(); }

}  // namespace ipex::ops

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    m.def("matmul(Tensor self, Tensor other) -> Tensor", IPEX_GUARDED(ipex::ops::matmul));
}
