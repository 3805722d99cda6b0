#include "ops/own_stem.h"

#include <algorithm>
#include <utility>

#include "base/isa.h"

namespace ipex::ops::own_stem {

namespace {
constexpr int64_t kMaxKernel = 16;
}  // namespace

bool fits(int64_t channels, int64_t kh, int64_t kw, int64_t groups, at::IntArrayRef dilation) {
    // 1x1 kernels are the pointwise kernel's (own_kernels.h).
    if (groups != 1 || channels < 1 || channels > kMaxChannels || kh < 1 || kw < 1 || kh * kw < 2) return false;
    if (kh > kMaxKernel || kw > kMaxKernel || dilation.size() != 2) return false;
    return dilation[0] == 1 && dilation[1] == 1;
}

bool available() { return isa::avx512_bf16(); }

void Geometry::set(at::IntArrayRef weight_sizes, at::IntArrayRef stride, at::IntArrayRef padding) {
    TORCH_CHECK(weight_sizes.size() == 4 && stride.size() == 2 && padding.size() == 2,
                "stem kernel: a 4-D weight, 2-D stride and padding");
    out_channels = weight_sizes[0];
    channels = weight_sizes[1];
    kh = weight_sizes[2];
    kw = weight_sizes[3];
    stride_h = stride[0];
    stride_w = stride[1];
    pad_h = padding[0];
    pad_w = padding[1];
}

Plan make_plan(const at::Tensor &weight, const at::Tensor &bias, at::IntArrayRef stride, at::IntArrayRef padding,
               const own_kernels::Problem &activation) {
    TORCH_CHECK(weight.is_floating_point(), "own stem kernel: a floating-point weight");
    Plan p;
    p.set(weight.sizes(), stride, padding);
    p.activation = activation;
    TORCH_CHECK(fits(p.channels, p.kh, p.kw, 1, {1, 1}), "own stem kernel: ", p.channels, " channels, ", p.kh, "x",
                p.kw, " kernel");

    const at::Tensor w = weight.to(at::kBFloat16).contiguous();
    const auto *values = reinterpret_cast<const uint16_t *>(w.data_ptr<at::BFloat16>());
    const int64_t row_pairs = p.row_pairs();
    p.packed = at::zeros({p.tiles() * p.tile_values()}, at::kShort);
    // Pair g's value `half`: kernel row and value of that row, or row -1 (a zero).
    const auto tap_of = [&](int64_t g, int64_t half) -> std::pair<int64_t, int64_t> {
        if (g < p.kh * row_pairs) return {g / row_pairs, 2 * (g % row_pairs) + half};
        const int64_t r = 2 * (g - p.kh * row_pairs) + half;  // a tail group: rows 2t and 2t + 1
        return {r < p.kh ? r : -1, p.row_values() - 1};
    };
    pack_tiles(p, p.pairs(), 2, p.tile_values(), tap_of, values,
               reinterpret_cast<uint16_t *>(p.packed.data_ptr<int16_t>()));
    p.bias.assign(p.tiles() * kTileChannels, 0.f);
    if (bias.defined()) {
        const at::Tensor b = bias.to(at::kFloat).contiguous();
        std::copy(b.data_ptr<float>(), b.data_ptr<float>() + p.out_channels, p.bias.begin());
    }
    return p;
}

}  // namespace ipex::ops::own_stem
