#include "ops/int8/int8_pointwise.h"

namespace ipex::quant::pointwise {

namespace {
constexpr int64_t kTileChannels = 64;
}  // namespace

bool fits(int64_t k, int64_t n, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
          at::IntArrayRef dilation, int64_t groups) {
    const auto all_equal = [](at::IntArrayRef v, int64_t x) {
        for (int64_t e : v)
            if (e != x) return false;
        return true;
    };
    return groups == 1 && k > 0 && k % 4 == 0 && n > 0 && n % kTileChannels == 0 && kernel.size() == 2 &&
           all_equal(kernel, 1) && stride.size() == 2 && stride[0] >= 1 && stride[1] >= 1 && all_equal(padding, 0) &&
           all_equal(dilation, 1);
}

Plan make_plan(const at::Tensor &weight, const at::Tensor &bias, const std::vector<float> &scales,
               at::IntArrayRef stride, bool in_s8, int64_t in_zero_point, const vnni::Epilogue &epilogue) {
    TORCH_CHECK(weight.dim() == 4 && weight.scalar_type() == at::kChar && weight.is_contiguous() &&
                    weight.size(2) == 1 && weight.size(3) == 1,
                "int8 pointwise kernel: the weight must be dense s8 [n, k, 1, 1]");
    Plan p;
    p.n = weight.size(0);
    p.k = weight.size(1);
    p.stride_h = stride[0];
    p.stride_w = stride[1];
    p.in_s8 = in_s8;
    p.epilogue = epilogue;
    p.folded = vnni::fold(epilogue);
    TORCH_CHECK(p.k % 4 == 0 && p.n % kTileChannels == 0 && static_cast<int64_t>(scales.size()) == p.n,
                "int8 pointwise kernel: k must divide by 4, n by 64, one scale per output");
    p.packed = at::empty({p.n * p.k}, at::TensorOptions().dtype(at::kChar));
    int8_t *out = p.packed.data_ptr<int8_t>();
    const int8_t *w = weight.data_ptr<int8_t>();
    for (int64_t oc = 0; oc < p.n; ++oc) {
        const int64_t tile = oc / kTileChannels, block = (oc % kTileChannels) / 16, lane = oc % 16;
        for (int64_t c = 0; c < p.k; ++c)
            out[((tile * (p.k / 4) + c / 4) * 4 + block) * 64 + lane * 4 + c % 4] = w[oc * p.k + c];
    }
    p.scale.resize(p.n);
    p.shift.resize(p.n);
    const at::Tensor bias_f = bias.defined() ? bias.to(at::kFloat).contiguous() : at::Tensor();
    const int64_t zp = in_zero_point + (in_s8 ? 128 : 0);  // the bytes the kernel multiplies
    for (int64_t oc = 0; oc < p.n; ++oc) {
        int64_t sum = 0;
        for (int64_t c = 0; c < p.k; ++c) sum += w[oc * p.k + c];
        const double b = bias_f.defined() ? bias_f.data_ptr<float>()[oc] : 0.0;
        p.scale[oc] = scales[oc];
        p.shift[oc] =
            static_cast<float>((b - static_cast<double>(zp * sum)) * scales[oc] + p.folded.shift_add);
    }
    p.folded.in_int32 = vnni::in_int32_range(p.folded, static_cast<double>(p.k) * 255.0 * 128.0, p.scale, p.shift);
    return p;
}

}  // namespace ipex::quant::pointwise
