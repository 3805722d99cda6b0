#include "checkpoint/decoders.h"

#include <ATen/ATen.h>

#include "base/errors.h"
#include "core/tensor_spec.h"

namespace ipex::woq {
namespace {

// AWQ GEMM packs output channel order_map[i] of each group of eight into nibble i, with
// order_map = {0, 2, 4, 6, 1, 3, 5, 7}; this is its inverse (nibble of channel c).
constexpr int64_t kAwqNibbleOfChannel[8] = {0, 4, 1, 5, 2, 6, 3, 7};

std::string shape_of(const at::Tensor &t) {
    return "[" + format_sizes(t.sizes()) + "]";
}

[[noreturn]] void mismatch(const SourceLayer &src, const std::string &what) {
    throw_bad_input("layer '" + src.name + "': " + what +
                    " (the checkpoint is corrupt or was written for another format; try the other of gptq/awq)");
}

void check_bits(const SourceLayer &src, int bits, bool awq) {
    if (bits == 4 || (bits == 8 && !awq)) return;
    throw_unsupported("layer '" + src.name + "': " + std::to_string(bits) + "-bit " + (awq ? "AWQ" : "GPTQ") +
                      " weights are not supported (" + (awq ? "4" : "4 and 8") + " bits are)");
}

void check_int32(const SourceLayer &src, const at::Tensor &t, const char *what) {
    if (t.scalar_type() != at::kInt || t.dim() != 2)
        mismatch(src, std::string(what) + " must be a 2-D I32 tensor, got " + std::string(c10::toString(t.scalar_type())) +
                          " " + shape_of(t));
}

void check_scales(const SourceLayer &src, int64_t n) {
    const at::Tensor &s = src.scales;
    if (!s.defined()) mismatch(src, "'scales' is missing");
    if (!at::isFloatingType(s.scalar_type()) || s.dim() != 2 || s.size(1) != n || s.size(0) < 1)
        mismatch(src, "qweight/scales shape mismatch: qweight gives " + std::to_string(n) +
                          " output channels but scales is " + std::string(c10::toString(s.scalar_type())) + " " +
                          shape_of(s) + " (expected [groups, " + std::to_string(n) + "])");
    if (!at::isfinite(s).all().item<bool>()) mismatch(src, "'scales' holds inf or nan");
}

// The group size the layer uses, checked against in_features and the number of groups.
int64_t resolve_group_size(const SourceLayer &src, int64_t k, int64_t groups, int stated, bool has_g_idx) {
    if (stated == -1) {
        if (groups != 1 && !has_g_idx)
            mismatch(src, "group size -1 (per channel) needs 1 group but scales has " + std::to_string(groups));
        return -1;
    }
    if (stated > 0) {
        if (k % stated != 0)
            throw_unsupported("layer '" + src.name + "': group size " + std::to_string(stated) +
                              " does not divide in_features " + std::to_string(k) +
                              "; only group sizes that divide the input channels are supported");
        if (groups != k / stated)
            mismatch(src, "group size " + std::to_string(stated) + " and " + std::to_string(k) +
                              " input channels make " + std::to_string(k / stated) + " groups but scales has " +
                              std::to_string(groups));
        return stated;
    }
    if (k % groups != 0)
        throw_unsupported("layer '" + src.name + "': " + std::to_string(groups) + " groups do not divide in_features " +
                          std::to_string(k) + "; only group sizes that divide the input channels are supported");
    return k / groups;
}

at::Tensor check_bias(const SourceLayer &src, int64_t n) {
    if (!src.bias.defined()) return src.bias;
    if (!at::isFloatingType(src.bias.scalar_type()) || src.bias.dim() != 1 || src.bias.size(0) != n)
        mismatch(src, "bias must be a float tensor [" + std::to_string(n) + "], got " + shape_of(src.bias));
    return src.bias.to(at::kFloat);
}

at::Tensor default_g_idx(int64_t k, int64_t group_size) {
    return group_size == -1 ? at::zeros({k}, at::kLong) : at::arange(k, at::kLong).div(group_size, "floor");
}

}  // namespace

at::Tensor unpack_int32(const at::Tensor &packed, int bits, int64_t dim) {
    const int64_t per = 32 / bits;
    const at::Tensor words = packed.to(at::kLong).bitwise_and(int64_t(0xffffffff));
    const at::Tensor shifts = at::arange(0, 32, bits, at::kLong);
    const int64_t mask = (int64_t(1) << bits) - 1;
    if (dim == 0) {
        const at::Tensor v = words.unsqueeze(1).bitwise_right_shift(shifts.view({1, per, 1})).bitwise_and(mask);
        return v.reshape({packed.size(0) * per, packed.size(1)});
    }
    const at::Tensor v = words.unsqueeze(2).bitwise_right_shift(shifts.view({1, 1, per})).bitwise_and(mask);
    return v.reshape({packed.size(0), packed.size(1) * per});
}

WoqLayer decode_gptq(const SourceLayer &src, const DecodeSettings &settings) {
    const int bits = settings.bits;
    check_bits(src, bits, false);
    if (!src.qweight.defined()) mismatch(src, "'qweight' is missing");
    if (!src.qzeros.defined()) mismatch(src, "'qzeros' is missing");
    check_int32(src, src.qweight, "qweight");
    check_int32(src, src.qzeros, "qzeros");
    const int64_t per = 32 / bits;
    const int64_t k = src.qweight.size(0) * per, n = src.qweight.size(1);
    if (k == 0 || n == 0) mismatch(src, "qweight " + shape_of(src.qweight) + " is empty");
    check_scales(src, n);
    const int64_t groups = src.scales.size(0);
    if (src.qzeros.size(0) != groups || src.qzeros.size(1) * per != n)
        mismatch(src, "qzeros " + shape_of(src.qzeros) + " does not match scales " + shape_of(src.scales) + " at " +
                          std::to_string(bits) + " bits (expected [" + std::to_string(groups) + ", " +
                          std::to_string(n / per) + "])");
    at::Tensor g_idx;
    if (src.g_idx.defined()) {
        if ((src.g_idx.scalar_type() != at::kInt && src.g_idx.scalar_type() != at::kLong) || src.g_idx.dim() != 1 ||
            src.g_idx.size(0) != k)
            mismatch(src, "g_idx must be an integer tensor [" + std::to_string(k) + "], got " + shape_of(src.g_idx));
        g_idx = src.g_idx.to(at::kLong);
    }
    const int64_t group_size = resolve_group_size(src, k, groups, settings.group_size, g_idx.defined());
    if (!g_idx.defined()) g_idx = default_g_idx(k, group_size);

    const int64_t mask = (int64_t(1) << bits) - 1;
    const at::Tensor q = unpack_int32(src.qweight, bits, 0);   // [K, N]
    at::Tensor z = unpack_int32(src.qzeros, bits, 1);           // [G, N]
    if (!settings.gptq_v2) z = z.add(1).bitwise_and(mask);      // v1 stores zero - 1
    return make_layer(src.name, q.t().to(at::kByte).contiguous(), g_idx, src.scales.t(), z.t().to(at::kFloat),
                      check_bias(src, n), bits, group_size);
}

WoqLayer decode_awq(const SourceLayer &src, const DecodeSettings &settings) {
    const int bits = settings.bits;
    check_bits(src, bits, true);
    if (!src.qweight.defined()) mismatch(src, "'qweight' is missing");
    if (!src.qzeros.defined())
        throw_unsupported("layer '" + src.name + "': AWQ without zero points (zero_point=false) is not supported");
    check_int32(src, src.qweight, "qweight");
    check_int32(src, src.qzeros, "qzeros");
    const int64_t k = src.qweight.size(0), n = src.qweight.size(1) * 8;
    if (k == 0 || n == 0) mismatch(src, "qweight " + shape_of(src.qweight) + " is empty");
    check_scales(src, n);
    const int64_t groups = src.scales.size(0);
    if (src.qzeros.size(0) != groups || src.qzeros.size(1) * 8 != n)
        mismatch(src, "qzeros " + shape_of(src.qzeros) + " does not match scales " + shape_of(src.scales) +
                          " (expected [" + std::to_string(groups) + ", " + std::to_string(n / 8) + "])");
    if (src.g_idx.defined()) mismatch(src, "AWQ layers have no g_idx; this looks like a GPTQ checkpoint");
    const int64_t group_size = resolve_group_size(src, k, groups, settings.group_size, false);

    // Field i of word c holds channel 8c + order_map[i]; gather channel j from field nibble_of[j % 8].
    const at::Tensor order = at::tensor(c10::ArrayRef<int64_t>(kAwqNibbleOfChannel, 8));
    auto reorder = [&](const at::Tensor &unpacked) {
        const int64_t rows = unpacked.size(0);
        return unpacked.view({rows, n / 8, 8}).index_select(2, order).reshape({rows, n});
    };
    const at::Tensor q = reorder(unpack_int32(src.qweight, bits, 1));  // [K, N]
    const at::Tensor z = reorder(unpack_int32(src.qzeros, bits, 1));   // [G, N]
    return make_layer(src.name, q.t().to(at::kByte).contiguous(), default_g_idx(k, group_size), src.scales.t(),
                      z.t().to(at::kFloat), check_bias(src, n), bits, group_size);
}

}  // namespace ipex::woq
