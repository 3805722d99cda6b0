#include "ops/int8/int8_stem.h"

#include "base/isa.h"

#include <utility>

namespace ipex::quant::stem {

namespace {
using ops::own_stem::kMaxChannels;
using ops::own_stem::kTileChannels;
constexpr int64_t kMaxRowBytes = 64;  // kw x channels: at most 16 groups a kernel row
}  // namespace

bool fits(int64_t channels, int64_t kh, int64_t kw, int64_t groups, at::IntArrayRef dilation) {
    if (groups != 1 || channels < 1 || channels > kMaxChannels || kh < 1 || kw < 1) return false;
    if (kw * channels > kMaxRowBytes || dilation.size() != 2) return false;
    return dilation[0] == 1 && dilation[1] == 1;
}

bool available() { return isa::avx512_vnni(); }

Plan make_plan(const at::Tensor &weight, const at::Tensor &bias, const std::vector<float> &scales,
               at::IntArrayRef stride, at::IntArrayRef padding, bool relu, bool in_s8, int64_t in_zero_point,
               bool out_s8, int64_t out_zero_point) {
    TORCH_CHECK(weight.dim() == 4 && weight.scalar_type() == at::kChar && weight.is_contiguous(),
                "int8 stem kernel: the weight must be dense s8 [O, C, kh, kw]");
    Plan p;
    p.set(weight.sizes(), stride, padding);
    const int64_t row_taps = p.kw * p.channels, groups_per_row = (row_taps + 3) / 4;
    const int64_t last = row_taps - 4 * (groups_per_row - 1);  // taps in a row's last group: 1-4
    if (last <= 2 && p.kh > 1) {
        p.tail_bytes = last;
        p.rows_per_tail = 4 / last;
        p.tail_groups = (p.kh + p.rows_per_tail - 1) / p.rows_per_tail;
        p.row_groups = groups_per_row - 1;
    } else {
        p.row_groups = groups_per_row;
    }
    vnni::Epilogue e;
    e.relu = relu;
    e.out_s8 = out_s8;
    e.out_zero_point = static_cast<float>(out_zero_point);
    p.epilogue = vnni::fold(e);
    p.in_s8 = in_s8;
    p.in_zero_point = static_cast<int>(in_zero_point);
    TORCH_CHECK(static_cast<int64_t>(scales.size()) == p.out_channels, "int8 stem kernel: one scale per output");

    const int64_t groups = p.groups(), tile_bytes = groups * kTileChannels * 4;
    p.packed = at::zeros({p.tiles() * tile_bytes}, at::TensorOptions().dtype(at::kChar));
    const int8_t *w = weight.data_ptr<int8_t>();
    // Group g's byte b: kernel row and byte of that row (tap q / C, channel q % C), or -1 (zero).
    const auto tap_of = [&](int64_t g, int64_t b) -> std::pair<int64_t, int64_t> {
        if (g < p.kh * p.row_groups) {
            const int64_t q = 4 * (g % p.row_groups) + b;
            return {q < row_taps ? g / p.row_groups : -1, q};
        }
        const int64_t r = (g - p.kh * p.row_groups) * p.rows_per_tail + b / p.tail_bytes;
        return {r < p.kh ? r : -1, 4 * p.row_groups + b % p.tail_bytes};
    };
    ops::own_stem::pack_tiles(p, groups, 4, tile_bytes, tap_of, w, p.packed.data_ptr<int8_t>());

    // The kernel multiplies bytes shifted to u8 (s8 + 128) and subtracts the zero point's share.
    const int64_t zp = in_zero_point + (in_s8 ? 128 : 0);
    const int64_t padded = (p.out_channels + 15) / 16 * 16;
    p.scale.assign(padded, 0.f);
    p.shift.assign(padded, 0.f);
    const at::Tensor bias_f = bias.defined() ? bias.to(at::kFloat).contiguous() : at::Tensor();
    for (int64_t oc = 0; oc < p.out_channels; ++oc) {
        int64_t sum = 0;
        for (int64_t k = 0; k < p.channels * p.kh * p.kw; ++k) sum += w[oc * p.channels * p.kh * p.kw + k];
        const double b = bias_f.defined() ? bias_f.data_ptr<float>()[oc] : 0.0;
        p.scale[oc] = scales[oc];
        // Folded as oneDNN does: (acc - zp x sum + bias) x scale.
        p.shift[oc] = static_cast<float>((b - static_cast<double>(zp * sum)) * scales[oc] + p.epilogue.shift_add);
    }
    const double taps = static_cast<double>(4 * groups);  // the padding bytes meet zero weights
    p.epilogue.in_int32 = vnni::in_int32_range(p.epilogue, taps * 255.0 * 128.0, p.scale, p.shift);
    return p;
}

}  // namespace ipex::quant::stem
