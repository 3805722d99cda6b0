#include "ops/attention_op.h"

#include <ATen/ExpandUtils.h>
#include <torch/library.h>

#include <limits>
#include <vector>

#include "base/isa.h"
#include "ops/attention_kernel.h"
#include "ops/op_errors.h"

namespace ipex::ops {
namespace attention_kernel {

bool available(bool bf16) { return bf16 ? isa::avx512_bf16() : isa::avx512(); }

}  // namespace attention_kernel

namespace {

std::vector<int64_t> batch_of(const at::Tensor &t) { return {t.sizes().begin(), t.sizes().end() - 2}; }

// `t` broadcast to batch + [rows, cols]; the caller's shape error names `what`.
at::Tensor expand_to(const at::Tensor &t, std::vector<int64_t> sizes, const char *what) {
    IPEX_CHECK_INPUT(at::is_expandable_to(t.sizes(), sizes), "ipex::attention: the ", what, " of shape ", t.sizes(),
                     " does not broadcast to the scores' shape ", c10::IntArrayRef(sizes));
    return t.expand(sizes);
}

// Element offset of each batch entry (row-major order over the batch dims) of a tensor whose
// leading dims are the batch.
std::vector<int64_t> batch_offsets(const at::Tensor &t, int64_t batch_dims) {
    int64_t count = 1;
    for (int64_t i = 0; i < batch_dims; ++i) count *= t.size(i);
    std::vector<int64_t> offsets(count, 0);
    for (int64_t n = 0; n < count; ++n) {
        int64_t rest = n, offset = 0;
        for (int64_t i = batch_dims - 1; i >= 0; --i) {
            offset += rest % t.size(i) * t.stride(i);
            rest /= t.size(i);
        }
        offsets[n] = offset;
    }
    return offsets;
}

attention_kernel::Operand operand(const at::Tensor &t, const std::vector<int64_t> &offsets) {
    return {t.data_ptr(), offsets.data(), t.stride(-2), t.stride(-1)};
}

}  // namespace

at::Tensor attention_reference(const at::Tensor &query, const at::Tensor &key, const at::Tensor &value,
                               const c10::optional<at::Tensor> &bias, const c10::optional<at::Tensor> &mask,
                               bool mask_keeps, double fill, double scale, bool causal) {
    at::Tensor s = at::matmul(query.to(at::kFloat), key.to(at::kFloat).transpose(-1, -2)) * scale;
    if (mask && mask->defined()) {
        const at::Tensor m = mask->to(at::kBool);
        s = mask_keeps ? at::where(m, s, fill) : s.masked_fill(m, fill);
    }
    if (bias && bias->defined()) s = s + bias->to(at::kFloat);
    if (causal) {
        const int64_t lq = s.size(-2), lk = s.size(-1);
        s = s.masked_fill(at::ones({lq, lk}, s.options().dtype(at::kBool)).triu(lk - lq + 1),
                          -std::numeric_limits<double>::infinity());
    }
    return at::matmul(at::softmax(s, -1), value.to(at::kFloat)).to(query.scalar_type());
}

at::Tensor attention(const at::Tensor &query, const at::Tensor &key, const at::Tensor &value,
                     const c10::optional<at::Tensor> &bias, const c10::optional<at::Tensor> &mask, bool mask_keeps,
                     double fill, double scale, bool causal) {
    IPEX_CHECK_INPUT(query.dim() >= 2 && key.dim() >= 2 && value.dim() >= 2,
                     "ipex::attention: query, key and value need at least 2 dims (got ", query.sizes(), ", ",
                     key.sizes(), ", ", value.sizes(), ")");
    IPEX_CHECK_INPUT(query.size(-1) == key.size(-1), "ipex::attention: query ", query.sizes(), " and key ",
                     key.sizes(), " differ in their last dim");
    IPEX_CHECK_INPUT(key.size(-2) == value.size(-2), "ipex::attention: key ", key.sizes(), " and value ",
                     value.sizes(), " hold different numbers of positions");
    const bool have_bias = bias && bias->defined(), have_mask = mask && mask->defined();
    IPEX_CHECK_INPUT(!have_bias || at::isFloatingType(bias->scalar_type()), "ipex::attention: the bias is ",
                     bias->scalar_type(), ", not floating point");
    IPEX_CHECK_INPUT(!have_mask || mask->scalar_type() == at::kBool || mask->scalar_type() == at::kByte,
                     "ipex::attention: the mask is ", mask->scalar_type(), ", not bool");
    std::vector<int64_t> batch;
    try {
        batch = at::infer_size(at::infer_size(batch_of(query), batch_of(key)), batch_of(value));
    } catch (const c10::Error &) {
        IPEX_CHECK_INPUT(false, "ipex::attention: the batch dims of query ", query.sizes(), ", key ", key.sizes(),
                         " and value ", value.sizes(), " do not broadcast");
    }
    const at::ScalarType type = query.scalar_type();
    const bool bf16 = type == at::kBFloat16;
    const int64_t lq = query.size(-2), lk = key.size(-2), d = query.size(-1), dv = value.size(-1);
    const bool kernel = (bf16 || type == at::kFloat) && key.scalar_type() == type && value.scalar_type() == type &&
                        attention_kernel::available(bf16) && lq > 0 && lk > 0 && d > 0 && dv > 0;
    auto with_rows = [&](int64_t rows, int64_t cols) {
        std::vector<int64_t> sizes = batch;
        sizes.push_back(rows);
        sizes.push_back(cols);
        return sizes;
    };
    at::Tensor bias_full, mask_full;
    if (have_bias) bias_full = expand_to(*bias, with_rows(lq, lk), "bias");
    if (have_mask) mask_full = expand_to(*mask, with_rows(lq, lk), "mask");
    if (!kernel) return attention_reference(query, key, value, bias, mask, mask_keeps, fill, scale, causal);

    const auto batch_dims = static_cast<int64_t>(batch.size());
    const at::Tensor q = query.expand(with_rows(lq, d)), k = key.expand(with_rows(lk, d)),
                     v = value.expand(with_rows(lk, dv));
    if (have_bias && bias_full.scalar_type() != at::kFloat) bias_full = bias_full.to(at::kFloat);
    at::Tensor out;
    if (batch_dims == 2) {
        out = at::empty({batch[0], lq, batch[1], dv}, query.options()).permute({0, 2, 1, 3});
    } else {
        out = at::empty(with_rows(lq, dv), query.options());
    }
    const auto q_off = batch_offsets(q, batch_dims), k_off = batch_offsets(k, batch_dims),
               v_off = batch_offsets(v, batch_dims), o_off = batch_offsets(out, batch_dims);
    std::vector<int64_t> b_off, m_off;
    attention_kernel::Problem p;
    p.bf16 = bf16;
    p.batch = static_cast<int64_t>(q_off.size());
    p.lq = lq;
    p.lk = lk;
    p.d = d;
    p.dv = dv;
    p.q = operand(q, q_off);
    p.k = operand(k, k_off);
    p.v = operand(v, v_off);
    if (have_bias) {
        b_off = batch_offsets(bias_full, batch_dims);
        p.bias = operand(bias_full, b_off);
    }
    if (have_mask) {
        m_off = batch_offsets(mask_full, batch_dims);
        p.mask = operand(mask_full, m_off);
    }
    p.mask_keeps = mask_keeps;
    p.fill = static_cast<float>(fill);
    p.scale = static_cast<float>(scale);
    p.causal = causal;
    p.out = out.data_ptr();
    p.out_offset = o_off.data();
    p.out_row = out.stride(-2);
    attention_kernel::run(p);
    return out;
}

}  // namespace ipex::ops

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    m.def("attention(Tensor query, Tensor key, Tensor value, Tensor? bias, Tensor? mask, bool mask_keeps, float fill, "
          "float scale, bool causal) -> Tensor",
          IPEX_GUARDED(ipex::ops::attention));
}
