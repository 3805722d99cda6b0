#include "checkpoint/woq_format.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "base/cpu_features.h"
#include "base/errors.h"
#include "base/isa.h"
#include "base/json_io.h"
#include "core/tensor_spec.h"
#include "checkpoint/safetensors.h"
#include "ops/woq/woq_layout.h"

namespace ipex::woq {

namespace {
// VDPBF16PS, or AMX-BF16 tiles the kernel lets this process use.
bool cpu_has_bf16_dot() {
    const CpuFeatures &cpu = cpu_features();
    return cpu.avx512_bf16 || (cpu.amx_bf16 && cpu.amx_permitted);
}
}  // namespace

std::string lowp_auto_text(LowpAuto rule) {
    if (rule == LowpAuto::bf16_model_or_cpu)
        return "bf16 where --dtype is bf16 or the CPU has BF16 instructions, else fp32";
    return "where --dtype is bf16: int8 for int4 weights on a CPU with AVX512-BF16 and VNNI and no AMX (prefill "
           "on int8 activations, decode steps on bf16, as IPEX's AUTO), else bf16 where the CPU has BF16 "
           "instructions, else int8 where it has AVX2; else fp32";
}

std::string resolve_lowp_mode(const std::optional<std::string> &mode, const std::string &dtype, LowpAuto rule,
                              int weight_bits) {
    if (mode && *mode != "auto") return *mode;
    const bool bf16_model = dtype == "bf16";
    if (rule == LowpAuto::bf16_model_or_cpu) return bf16_model || cpu_has_bf16_dot() ? "bf16" : "fp32";
    if (!bf16_model) return "fp32";
    const CpuFeatures &cpu = cpu_features();
    const bool amx = cpu.amx_bf16 && cpu.amx_permitted;  // its bf16 prefill reads lib/woq's form
    if (weight_bits == 4 && cpu.avx512_bf16 && cpu.avx512_vnni && !amx) return "int8";
    if (cpu_has_bf16_dot()) return "bf16";
    return isa::avx2_fma() ? "int8" : "fp32";
}
namespace {

int64_t max_q(int bits) { return (int64_t(1) << bits) - 1; }

uint64_t tensor_bytes(const at::Tensor &t) {
    return t.defined() ? static_cast<uint64_t>(t.numel()) * t.element_size() : 0;
}

// A layer's shape fields, no tensors yet.
WoqLayer describe_layer(const std::string &name, int64_t rows, int64_t cols, int bits, int64_t group_size,
                        int64_t source_group_size) {
    TORCH_INTERNAL_ASSERT((bits == 4 || bits == 8) && rows >= 0 && cols > 0 && group_size > 0 && cols % group_size == 0);
    WoqLayer layer;
    layer.name = name;
    layer.in_features = cols;
    layer.out_features = rows;
    layer.bits = bits;
    layer.group_size = group_size;
    layer.source_group_size = source_group_size;
    return layer;
}

}  // namespace

uint64_t WoqLayer::bytes() const {
    return tensor_bytes(qweight) + tensor_bytes(scales) + tensor_bytes(zeros) + tensor_bytes(perm) +
           tensor_bytes(bias);
}

WoqLayer allocate_layer(const std::string &name, int64_t rows, int64_t cols, int bits, int64_t group_size,
                        int64_t source_group_size) {
    WoqLayer layer = describe_layer(name, rows, cols, bits, group_size, source_group_size);
    layer.qweight = at::empty({rows, packed_row_bytes(cols, bits)}, at::kByte);
    layer.scales = at::empty({rows, cols / group_size}, at::kFloat);
    layer.zeros = at::empty({rows, cols / group_size}, at::kFloat);
    return layer;
}

at::Tensor pack_weight(const at::Tensor &q, int bits) {
    TORCH_INTERNAL_ASSERT(q.dim() == 2 && q.scalar_type() == at::kByte);
    const int64_t n = q.size(0), k = q.size(1), kp = padded_in_features(k);
    at::Tensor padded = at::zeros({n, kp}, at::kByte);
    padded.narrow(1, 0, k).copy_(q);
    if (bits == 8) return padded;
    TORCH_INTERNAL_ASSERT(bits == 4);
    const at::Tensor halves = padded.view({n, kp / kBlock, 2, kBlock / 2});
    const at::Tensor lo = halves.select(2, 0), hi = halves.select(2, 1);
    return lo.bitwise_or(hi.bitwise_left_shift(4)).reshape({n, kp / 2}).contiguous();
}

at::Tensor unpack_weight(const at::Tensor &packed, int bits, int64_t in_features) {
    const int64_t n = packed.size(0);
    if (bits == 8) return packed.narrow(1, 0, in_features).contiguous();
    const int64_t kp = packed.size(1) * 2;
    const at::Tensor blocks = packed.view({n, kp / kBlock, 1, kBlock / 2});
    const at::Tensor lo = blocks.bitwise_and(0x0f), hi = blocks.bitwise_right_shift(4);
    return at::cat({lo, hi}, 2).reshape({n, kp}).narrow(1, 0, in_features).contiguous();
}

WoqLayer make_layer(const std::string &name, const at::Tensor &q, const at::Tensor &g_idx, const at::Tensor &scales,
                    const at::Tensor &zeros, const at::Tensor &bias, int bits, int64_t source_group_size) {
    const int64_t n = q.size(0), k = q.size(1), g = scales.size(1);
    const at::Tensor gi = g_idx.to(at::kLong).contiguous();
    if (gi.numel() != k)
        throw_bad_input("layer '" + name + "': g_idx has " + std::to_string(gi.numel()) + " entries but the layer has " +
                        std::to_string(k) + " input channels");
    if (k > 0 && (gi.min().item<int64_t>() < 0 || gi.max().item<int64_t>() >= g))
        throw_bad_input("layer '" + name + "': g_idx holds a group outside 0.." + std::to_string(g - 1) +
                        " (the scales have " + std::to_string(g) + " groups)");
    // Sort the channels by group; stable, so channels of one group keep their order.
    const at::Tensor perm = std::get<1>(gi.sort(/*stable=*/true, 0, false));
    const at::Tensor sorted = gi.index_select(0, perm);
    const bool identity = at::equal(perm, at::arange(k, at::kLong));
    // Kernel group size: gcd of the lengths of the runs of equal groups.
    int64_t gs = 0, run = 0;
    const int64_t *s = sorted.data_ptr<int64_t>();
    for (int64_t i = 0; i < k; ++i) {
        ++run;
        if (i + 1 == k || s[i + 1] != s[i]) {
            gs = std::gcd(gs, run);
            run = 0;
        }
    }
    if (gs == 0) gs = 1;
    WoqLayer layer = describe_layer(name, n, k, bits, gs, source_group_size);
    layer.bias = bias.defined() ? bias.to(at::kFloat).contiguous() : bias;
    const at::Tensor group_of_new = sorted.index_select(0, at::arange(0, k, gs, at::kLong));
    layer.scales = scales.to(at::kFloat).index_select(1, group_of_new).contiguous();
    layer.zeros = zeros.to(at::kFloat).index_select(1, group_of_new).contiguous();
    const at::Tensor qp = identity ? q : q.index_select(1, perm);
    layer.act_order = !identity;
    if (!identity) layer.perm = perm.contiguous();
    layer.qweight = pack_weight(qp.contiguous(), bits);
    return layer;
}

at::Tensor dequantize(const WoqLayer &layer) {
    const at::Tensor q = unpack_weight(layer.qweight, layer.bits, layer.in_features).to(at::kFloat);
    const at::Tensor z = layer.zeros.repeat_interleave(layer.group_size, 1);
    const at::Tensor s = layer.scales.repeat_interleave(layer.group_size, 1);
    const at::Tensor w = (q - z) * s;
    if (!layer.perm.defined()) return w;
    return at::empty_like(w).index_copy_(1, layer.perm, w);
}

at::Tensor dequantize_rows(const WoqLayer &layer, const at::Tensor &rows) {
    WoqLayer part = layer;  // shares the other tensors
    part.qweight = layer.qweight.index_select(0, rows);
    part.scales = layer.scales.index_select(0, rows);
    part.zeros = layer.zeros.index_select(0, rows);
    part.out_features = rows.numel();
    part.bias = at::Tensor();
    return dequantize(part);
}

WoqLayer quantize_rtn(const std::string &name, const at::Tensor &weight, const at::Tensor &bias, int bits,
                      int64_t group_size) {
    const int64_t n = weight.size(0), k = weight.size(1);
    const int64_t gs = group_size == -1 ? k : group_size;
    if (gs <= 0 || k % gs != 0)
        throw_unsupported("layer '" + name + "': group size " + std::to_string(group_size) +
                          " does not divide in_features " + std::to_string(k) + "; pick a divisor or -1");
    // Blocks of rows, so the temporaries stay a few MB whatever the layer's size (an LLM's
    // lm_head is hundreds of MB in fp32): each block is quantized and packed into its rows of
    // the result, so only the packed weight grows. Rows are independent: the same result.
    const int64_t block = std::max<int64_t>(1, (int64_t(1) << 20) / std::max<int64_t>(k, 1));
    WoqLayer layer = allocate_layer(name, n, k, bits, gs, group_size);
    layer.bias = bias.defined() ? bias.to(at::kFloat).contiguous() : bias;
    for (int64_t r0 = 0; r0 < n; r0 += block) {
        const int64_t rows = std::min(block, n - r0);
        const at::Tensor w = weight.narrow(0, r0, rows).to(at::kFloat).reshape({rows, k / gs, gs});
        const at::Tensor lo = std::get<0>(w.min(2)).clamp_max(0), hi = std::get<0>(w.max(2)).clamp_min(0);
        at::Tensor s = (hi - lo) / static_cast<double>(max_q(bits));
        s = at::where(s > 0, s, at::ones_like(s));
        const at::Tensor z = (-lo / s).round().clamp(0, max_q(bits));
        const at::Tensor qb = (w / s.unsqueeze(2)).round().add(z.unsqueeze(2)).clamp(0, max_q(bits));
        layer.qweight.narrow(0, r0, rows).copy_(pack_weight(qb.reshape({rows, k}).to(at::kByte), bits));
        layer.scales.narrow(0, r0, rows).copy_(s);
        layer.zeros.narrow(0, r0, rows).copy_(z);
    }
    return layer;
}

namespace {

nlohmann::json layer_json(const WoqLayer &l) {
    return {{"name", l.name},
            {"in_features", l.in_features},
            {"out_features", l.out_features},
            {"bits", l.bits},
            {"group_size", l.group_size},
            {"source_group_size", l.source_group_size},
            {"act_order", l.act_order},
            {"bias", l.bias.defined()}};
}

constexpr const char *kRewriteHint = "write it again with 'ipex-tool import'";

std::string checkpoint_name(const Checkpoint &file) {
    return "weight-only checkpoint '" + file.files().front()->path() + "'";
}

[[noreturn]] void fail(const Checkpoint &file, const std::string &what) {
    throw_bad_input(checkpoint_name(file) + ": " + what + " (" + kRewriteHint + ")");
}

// A metadata entry parsed (depth-limited, like every JSON the tool reads).
nlohmann::json metadata_json(const Checkpoint &file, const char *key) {
    const auto &m = file.metadata();
    const auto it = m.find(key);
    if (it == m.end()) fail(file, std::string("metadata has no '") + key + "'");
    return parse_json(it->second, file.files().front()->path() + " metadata '" + key + "'", kRewriteHint);
}

at::Tensor expect_tensor(const Checkpoint &file, const std::string &name, at::ScalarType type,
                         const std::vector<int64_t> &shape) {
    if (!file.has(name)) fail(file, "tensor '" + name + "' is missing");
    const TensorInfo &info = file.info(name);
    if (info.type != type || info.shape != shape) {
        fail(file, "tensor '" + name + "' must be " + std::string(c10::toString(type)) + " [" + format_sizes(shape) + "]");
    }
    return file.tensor(name);
}

}  // namespace

void write_woq_checkpoint(const std::string &dst, const WoqCheckpoint &checkpoint) {
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    nlohmann::json layers = nlohmann::json::array();
    for (const auto &[name, l] : checkpoint.layers) {
        layers.push_back(layer_json(l));
        tensors.emplace_back(name + ".qweight", l.qweight);
        tensors.emplace_back(name + ".scales", l.scales);
        tensors.emplace_back(name + ".zeros", l.zeros);
        if (l.perm.defined()) tensors.emplace_back(name + ".perm", l.perm);
        if (l.bias.defined()) tensors.emplace_back(name + ".bias", l.bias);
    }
    const std::map<std::string, std::string> metadata = {
        {"format", kWoqFormat},
        {"format_version", kWoqFormatVersion},
        {"layers", layers.dump()},
        {"full_precision", nlohmann::json(checkpoint.full_precision).dump()},
        {"source", checkpoint.source.dump()},
    };
    write_safetensors(dst, tensors, metadata);
}

bool is_woq_checkpoint(const Checkpoint &file) {
    const auto &m = file.metadata();
    const auto it = m.find("format");
    return it != m.end() && it->second == kWoqFormat;
}

WoqCheckpoint read_woq_checkpoint(const Checkpoint &file) {
    const auto &m = file.metadata();
    if (!is_woq_checkpoint(file)) fail(file, "metadata 'format' is not 'ipex-woq'");
    if (m.count("format_version") == 0 || m.at("format_version") != kWoqFormatVersion)
        throw_unsupported("weight-only checkpoint '" + file.files().front()->path() +
                          "' has a format_version this ipex-tool does not read; import it again");
    WoqCheckpoint out;
    const nlohmann::json layers = metadata_json(file, "layers");
    const nlohmann::json full = metadata_json(file, "full_precision");
    out.source = metadata_json(file, "source");
    if (!layers.is_array()) fail(file, "metadata 'layers' is not a list");
    if (!full.is_array()) fail(file, "metadata 'full_precision' is not a list");
    for (const auto &f : full) {
        if (!f.is_string()) fail(file, "metadata 'full_precision' holds " + json_type_name(f) + ", not a module name");
        out.full_precision.push_back(f.get<std::string>());
    }
    std::set<std::string> expected_tensors;
    for (size_t i = 0; i < layers.size(); ++i) {
        const JsonReader j(layers[i], checkpoint_name(file), "metadata layers[" + std::to_string(i) + "]",
                           kRewriteHint);
        WoqLayer l;
        l.name = j.str("name");
        l.in_features = j.integer("in_features");
        l.out_features = j.integer("out_features");
        l.bits = static_cast<int>(j.integer("bits", 0, 64));
        l.group_size = j.integer("group_size");
        l.source_group_size = j.integer("source_group_size");
        l.act_order = j.boolean_or("act_order", false);
        const bool has_bias = j.boolean_or("bias", false);
        if (l.bits != 4 && l.bits != 8) fail(file, "layer '" + l.name + "' has bits " + std::to_string(l.bits));
        if (l.in_features <= 0 || l.out_features <= 0 || l.in_features > (int64_t(1) << 24) ||
            l.out_features > (int64_t(1) << 24))
            fail(file, "layer '" + l.name + "' has out-of-range in/out features");
        if (l.group_size <= 0 || l.in_features % l.group_size != 0)
            fail(file, "layer '" + l.name + "' has a group size that does not divide in_features");
        const int64_t n = l.out_features, g = l.groups();
        l.qweight = expect_tensor(file, l.name + ".qweight", at::kByte, {n, packed_row_bytes(l.in_features, l.bits)});
        l.scales = expect_tensor(file, l.name + ".scales", at::kFloat, {n, g});
        l.zeros = expect_tensor(file, l.name + ".zeros", at::kFloat, {n, g});
        expected_tensors.insert({l.name + ".qweight", l.name + ".scales", l.name + ".zeros"});
        if (l.act_order) {
            l.perm = expect_tensor(file, l.name + ".perm", at::kLong, {l.in_features});
            if (!at::equal(std::get<0>(l.perm.sort()), at::arange(l.in_features, at::kLong)))
                fail(file, "tensor '" + l.name + ".perm' is not a permutation of the input channels");
            expected_tensors.insert(l.name + ".perm");
        }
        if (has_bias) {
            l.bias = expect_tensor(file, l.name + ".bias", at::kFloat, {n});
            expected_tensors.insert(l.name + ".bias");
        }
        if (!out.layers.emplace(l.name, l).second) fail(file, "layer '" + l.name + "' is listed twice");
    }
    for (const auto &name : file.names())
        if (!expected_tensors.count(name)) fail(file, "tensor '" + name + "' belongs to no listed layer");
    return out;
}

}  // namespace ipex::woq
