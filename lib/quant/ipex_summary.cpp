#include "quant/ipex_summary.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "base/atomic_file.h"
#include "base/bounded_file.h"
#include "base/errors.h"
#include "base/json_io.h"
#include "base/log.h"

namespace ipex::quant {
namespace {

using nlohmann::json;

constexpr const char *kHint = "the file is IPEX's qconfig summary (save_qconf_summary); fix the entry or make "
                              "a qconfig with 'ipex-tool calibrate'";

// One conv/linear/matmul entry of the summary, in the order the summary lists them.
struct SummaryOp {
    std::string where;  // "'layer' q_op_infos['3'] (fqn 'a.b', Linear)" for messages
    std::string fqn, kind;
    std::string key;  // "<op index>_0": the key of its SmoothQuant parameters
    const json *info = nullptr;
};

// Our kind for IPEX's op_type: module classes ("<class 'torch.nn.modules.conv.Conv2d'>") and
// functions ("<built-in method conv2d of type object ...>", "<built-in function linear>",
// "<method 'matmul' of 'torch._C.TensorBase' objects>"); "" for every other op.
std::string kind_of(const std::string &op_type) {
    static const std::vector<std::pair<std::string, std::string>> classes = {
        {".Conv1d'>", "conv1d"}, {".Conv2d'>", "conv2d"}, {".Conv3d'>", "conv3d"}, {".Linear'>", "linear"}};
    if (op_type.rfind("<class ", 0) == 0) {
        for (const auto &[suffix, kind] : classes)
            if (op_type.size() > suffix.size() && op_type.compare(op_type.size() - suffix.size(), suffix.size(), suffix) == 0)
                return kind;
        return "";
    }
    for (const char *prefix : {"<built-in method ", "<built-in function ", "<function ", "<method '"}) {
        const std::string p = prefix;
        if (op_type.rfind(p, 0) != 0) continue;
        const size_t end = op_type.find_first_of(" '>", p.size());
        const std::string name = op_type.substr(p.size(), end == std::string::npos ? std::string::npos : end - p.size());
        for (const auto &kind : quantizable_kinds())
            if (name == kind) return kind;
        return "";
    }
    return "";
}

std::string short_type(const std::string &op_type) {
    const size_t dot = op_type.rfind('.');
    if (op_type.rfind("<class ", 0) == 0 && dot != std::string::npos) return op_type.substr(dot + 1, op_type.size() - dot - 3);
    return op_type;
}

// "torch.quint8" -> u8, "torch.qint8" -> s8; false for float types.
bool quantized_dtype(const std::string &name, QDtype &dtype) {
    if (name == "torch.quint8") dtype = QDtype::u8;
    else if (name == "torch.qint8") dtype = QDtype::s8;
    else return false;
    return true;
}

// The one value of a scale or zero point: a list of one number, or (SmoothQuant) an object of
// such lists keyed by "<op index>_<weight index>", of which `key` is taken when there are several.
double single_number(const JsonReader &r, const char *field, const std::string &key) {
    const json *v = &r.get(field);
    if (v->is_object()) {
        if (v->empty()) r.fail(field, "is an empty object");
        v = v->size() > 1 && v->contains(key) ? &(*v)[key] : &v->begin().value();
    }
    if (!v->is_array() || v->size() != 1 || !(*v)[0].is_number())
        r.fail(field, "must be a list of one number (a per-tensor parameter)");
    const double x = (*v)[0].get<double>();
    if (!std::isfinite(x)) r.fail(field, "must be finite");
    return x;
}

std::vector<double> number_list(const JsonReader &r, const json &a, const std::string &field) {
    if (!a.is_array() || a.empty() || a.size() > kMaxChannels)
        r.fail(field, "must be a list of 1.." + std::to_string(kMaxChannels) + " numbers");
    std::vector<double> out;
    out.reserve(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].is_number() || !std::isfinite(a[i].get<double>()))
            r.fail(field + "[" + std::to_string(i) + "]", "must be a finite number");
        out.push_back(a[i].get<double>());
    }
    return out;
}

TensorQ tensor_q(const JsonReader &r, const std::string &key, QDtype dtype) {
    TensorQ t;
    t.dtype = dtype;
    t.scale = single_number(r, "scale", key);
    if (!(t.scale > 0)) r.fail("scale", "must be > 0 (got " + json(t.scale).dump() + ")");
    const double zp = single_number(r, "zero_point", key);
    if (zp != std::floor(zp) || zp < qmin(dtype) || zp > qmax(dtype))
        r.fail("zero_point", json(zp).dump() + " is not an integer in [" + std::to_string(qmin(dtype)) + ", " +
                                 std::to_string(qmax(dtype)) + "] (" + qdtype_name(dtype) + ")");
    t.zero_point = static_cast<int64_t>(zp);
    return t;
}

// The dtype a tensor info asks for: force_dtype, else inf_dtype.
std::string wanted_dtype(const JsonReader &r) { return r.str_or("force_dtype", r.str_or("inf_dtype", "torch.float32")); }

// Every quantized tensor of the summary by id (inputs, outputs and layer outputs with a scale),
// and which tensor each relu-like op writes from which it reads.
class TensorTable {
public:
    void add(const JsonReader &r, const std::string &key) {
        if (!r.has("id") || !r.has("scale")) return;
        const int64_t id = r.integer("id");
        if (by_id_.count(id)) return;
        QDtype dtype = QDtype::u8;
        if (!quantized_dtype(wanted_dtype(r), dtype) && !quantized_dtype(r.str_or("inf_dtype", ""), dtype)) {
            const double zp = single_number(r, "zero_point", key);
            dtype = zp == 0 ? QDtype::s8 : QDtype::u8;
        }
        by_id_[id] = tensor_q(r, key, dtype);
    }
    void add_relu(int64_t in, int64_t out) { relu_out_[in] = out; }
    // An add of tensors a and b into out: found from either operand.
    void add_sum(int64_t a, int64_t b, int64_t out) {
        sums_[a] = {b, out};
        sums_[b] = {a, out};
    }

    const TensorQ *find(int64_t id) const {
        auto it = by_id_.find(id);
        return it == by_id_.end() ? nullptr : &it->second;
    }
    // The tensor a relu writes from tensor `id`, when the summary has one.
    const TensorQ *after_relu(int64_t id) const {
        auto it = relu_out_.find(id);
        return it == relu_out_.end() ? nullptr : find(it->second);
    }
    // The id of that tensor, or -1.
    int64_t relu_output(int64_t id) const {
        auto it = relu_out_.find(id);
        return it == relu_out_.end() ? -1 : it->second;
    }
    // The add reading tensor `id`: (the other operand's id, the sum's id), or (-1, -1).
    std::pair<int64_t, int64_t> sum_reading(int64_t id) const {
        auto it = sums_.find(id);
        return it == sums_.end() ? std::pair<int64_t, int64_t>{-1, -1} : it->second;
    }

private:
    std::map<int64_t, TensorQ> by_id_;
    std::map<int64_t, int64_t> relu_out_;
    std::map<int64_t, std::pair<int64_t, int64_t>> sums_;
};

// add(a, b) as a method, an operator or a function: "<method 'add' of 'torch._C.TensorBase'
// objects>", "<built-in function add>", "<built-in method add of type object ...>".
bool is_add(const std::string &op_type) {
    return op_type == "<method 'add' of 'torch._C.TensorBase' objects>" || op_type == "<built-in function add>" ||
           op_type.rfind("<built-in method add of ", 0) == 0;
}

bool is_relu(const std::string &op_type) {
    return op_type.find(" relu") != std::string::npos || op_type.find("'relu") != std::string::npos ||
           op_type.find(".ReLU'>") != std::string::npos;
}

// Walks every op entry: collects the tensor table and the quantizable entries in order.
void read_summary(const json &summary, const std::string &where, TensorTable &tensors, std::vector<SummaryOp> &ops) {
    if (summary.size() > kMaxQConfigOps) throw_bad_input(where + ": holds more than " + std::to_string(kMaxQConfigOps) + " modules");
    size_t count = 0;
    for (const auto &[layer, entry] : summary.items()) {
        if (!entry.is_object()) throw_bad_input(where + ": '" + layer + "' must be an object; " + kHint);
        for (const char *section : {"q_op_infos", "nonq_op_infos"}) {
            if (!entry.contains(section)) continue;
            const json &infos = entry[section];
            if (!infos.is_object()) throw_bad_input(where + ": '" + layer + "'." + section + " must be an object; " + kHint);
            // Execution order: the keys are the op indices.
            std::vector<std::pair<long, std::string>> order;
            for (const auto &[k, v] : infos.items()) {
                char *end = nullptr;
                const long idx = std::strtol(k.c_str(), &end, 10);
                if (k.empty() || *end != '\0' || idx < 0)
                    throw_bad_input(where + ": '" + layer + "'." + section + " key '" + k + "' is not an op index; " + kHint);
                order.emplace_back(idx, k);
            }
            std::sort(order.begin(), order.end());
            for (const auto &[idx, k] : order) {
                if (++count > kMaxQConfigOps) throw_bad_input(where + ": holds more than " + std::to_string(kMaxQConfigOps) + " ops");
                const json &info = infos[k];
                const std::string path = "'" + layer + "'." + section + "['" + k + "']";
                const JsonReader r(info, where, path, kHint);
                const std::string op_type = r.str("op_type");
                const std::string key = std::to_string(idx) + "_0";
                std::vector<int64_t> in_ids, out_ids;
                for (const char *field : {"input_tensor_infos", "output_tensor_infos"}) {
                    if (!r.has(field)) continue;
                    const json &list = r.array(field);
                    if (list.size() > kMaxChannels) r.fail(field, "is too long");
                    for (size_t i = 0; i < list.size(); ++i) {
                        if (!list[i].is_object()) r.fail(std::string(field) + "[" + std::to_string(i) + "]", "must be an object");
                        const JsonReader t(list[i], where, r.join(std::string(field) + "[" + std::to_string(i) + "]"), kHint);
                        tensors.add(t, key);
                        if (t.has("id")) (field[0] == 'i' ? in_ids : out_ids).push_back(t.integer("id"));
                    }
                }
                if (is_relu(op_type) && !in_ids.empty() && !out_ids.empty()) tensors.add_relu(in_ids[0], out_ids[0]);
                if (is_add(op_type) && in_ids.size() == 2 && !out_ids.empty())
                    tensors.add_sum(in_ids[0], in_ids[1], out_ids[0]);
                const std::string kind = kind_of(op_type);
                if (section == std::string("q_op_infos") && !kind.empty())
                    ops.push_back({path + " (fqn '" + r.str_or("fqn", "") + "', " + short_type(op_type) + ")",
                                   r.str_or("fqn", ""), kind, key, &info});
            }
        }
        if (entry.contains("layer_output_infos") && entry["layer_output_infos"].is_array()) {
            const json &list = entry["layer_output_infos"];
            for (size_t i = 0; i < list.size() && i < kMaxChannels; ++i)
                if (list[i].is_object())
                    tensors.add(JsonReader(list[i], where, "'" + layer + "'.layer_output_infos[" + std::to_string(i) + "]", kHint), "");
        }
    }
}

// A range the op's output cannot leave for inputs in [lo, hi]: per output channel the sums of
// the positive and negative weights times the input bounds, plus the bias.
Range output_bound(const QuantOp &op, const TensorQ &input) {
    const double lo = input.scale * double(qmin(input.dtype) - input.zero_point);
    const double hi = input.scale * double(qmax(input.dtype) - input.zero_point);
    const at::Tensor w = op.weight.to(at::kDouble).flatten(1);
    const at::Tensor pos = w.clamp_min(0).sum(1), neg = w.clamp_max(0).sum(1);
    at::Tensor top = pos * hi + neg * lo, bottom = pos * lo + neg * hi;
    if (op.bias) {
        top = top + op.bias->to(at::kDouble);
        bottom = bottom + op.bias->to(at::kDouble);
    }
    Range r{bottom.min().item<double>(), top.max().item<double>()};
    if (op.relu) r.min = std::max(r.min, 0.0);
    return r;
}

// The residual add the op feeds in the model, in int8 when the summary quantizes both its
// operands and its result (after the relu that follows it, when the model fuses one); else the
// add stays float.
std::optional<AddQ> fused_add(const QuantOp &op, int64_t out_id, const TensorTable &tensors) {
    if (!op.add) return std::nullopt;
    const int64_t chain = op.relu ? tensors.relu_output(out_id) : out_id;
    if (chain < 0) return std::nullopt;
    const auto [other_id, sum_id] = tensors.sum_reading(chain);
    const TensorQ *other = other_id < 0 ? nullptr : tensors.find(other_id);
    const TensorQ *sum = nullptr;
    if (sum_id >= 0) sum = op.add_relu ? tensors.after_relu(sum_id) : tensors.find(sum_id);
    if (!other || !sum) return std::nullopt;
    AddQ a;
    a.other = *other;
    a.output = *sum;
    a.relu = op.add_relu != nullptr;
    return a;
}

OpConfig kept_in_float(const QuantOp &op, const std::string &dtype) {
    OpConfig c;
    c.id = op.id;
    c.module = op.module;
    c.kind = op.kind;
    c.dtype = dtype;
    c.weight.scales = per_channel_weight_scales(op.weight);
    c.relu = op.relu != nullptr;
    return c;
}

OpConfig convert_op(const SummaryOp &s, const QuantOp &op, const TensorTable &tensors, const std::string &where,
                    std::optional<double> &alpha) {
    const JsonReader r(*s.info, where, s.where, kHint);
    const json &inputs = r.array("input_tensor_infos");
    if (inputs.empty() || !inputs[0].is_object() || inputs[0].empty())
        r.fail("input_tensor_infos", "has no first input (the activation the op reads)");
    const JsonReader in(inputs[0], where, r.join("input_tensor_infos[0]"), kHint);
    const std::string wanted = wanted_dtype(in);
    QDtype dtype = QDtype::u8;
    if (!quantized_dtype(wanted, dtype)) {
        if (wanted == "torch.float32") return kept_in_float(op, "fp32");
        if (wanted == "torch.bfloat16") return kept_in_float(op, "bf16");
        in.fail(in.has("force_dtype") ? "force_dtype" : "inf_dtype",
                "'" + wanted + "' is not torch.quint8, torch.qint8, torch.float32 or torch.bfloat16");
    }
    if (!in.has("scale")) in.fail("scale", "is missing: the op is quantized but the summary has no scale for its input");
    OpConfig c;
    c.id = op.id;
    c.module = op.module;
    c.kind = op.kind;
    c.dtype = "int8";
    c.relu = op.relu != nullptr;

    // SmoothQuant: IPEX multiplies the input by the activation factors and the weight by the
    // weight factors; ipex-tool's factors s are the weight's (W * s, X / s).
    const auto in_channels = static_cast<size_t>(op.weight.size(1));
    const json *weight_info = nullptr;
    if (r.has("weight_tensor_infos")) {
        const json &weights = r.array("weight_tensor_infos");
        if (!weights.empty() && weights[0].is_object() && !weights[0].empty()) weight_info = &weights[0];
    }
    if (in.has("smooth_quant_scaling_factor")) {
        const json &f = in.get("smooth_quant_scaling_factor");
        const json *act = &f;
        if (f.is_object()) {
            if (f.empty()) in.fail("smooth_quant_scaling_factor", "is an empty object");
            act = f.size() > 1 && f.contains(s.key) ? &f[s.key] : &f.begin().value();
        }
        const std::vector<double> factors = number_list(in, *act, "smooth_quant_scaling_factor");
        for (double x : factors)
            if (!(x > 0)) in.fail("smooth_quant_scaling_factor", "must hold numbers > 0");
        for (double x : factors) c.smooth_factors.push_back(1.0 / x);
    }
    if (weight_info) {
        const JsonReader w(*weight_info, where, r.join("weight_tensor_infos[0]"), kHint);
        if (w.has("smooth_quant_scaling_factor"))
            c.smooth_factors = number_list(w, w.get("smooth_quant_scaling_factor"), "smooth_quant_scaling_factor");
        if (w.has("scale")) {
            std::vector<double> scales = number_list(w, w.get("scale"), "scale");
            const auto out_channels = static_cast<size_t>(op.weight.size(0));
            if (scales.size() == 1) scales.assign(out_channels, scales[0]);
            if (scales.size() != out_channels)
                w.fail("scale", "holds " + std::to_string(scales.size()) + " scales but op '" + op.id + "' has " +
                                    std::to_string(out_channels) + " output channels");
            for (double x : scales)
                if (!(x > 0)) w.fail("scale", "must hold numbers > 0");
            if (w.has("zero_point"))
                for (double z : number_list(w, w.get("zero_point"), "zero_point"))
                    if (z != 0) w.fail("zero_point", "must be all 0: weights are symmetric int8");
            c.weight.scales = std::move(scales);
        }
    }
    if (c.weight.scales.empty()) c.weight.scales = per_channel_weight_scales(op.weight);
    if (!c.smooth_factors.empty()) {
        if (op.kind != "linear" && op.kind != "matmul") r.fail("smooth_quant_scaling_factor", "is given for a " + op.kind + "; only linears are smoothed");
        if (c.smooth_factors.size() != in_channels)
            r.fail("smooth_quant_scaling_factor", "holds " + std::to_string(c.smooth_factors.size()) +
                                                      " factors but op '" + op.id + "' has " + std::to_string(in_channels) +
                                                      " input channels");
        if (r.has("activation_observer") && r.get("activation_observer").is_object()) {
            const JsonReader obs(r.get("activation_observer"), where, r.join("activation_observer"), kHint);
            if (obs.has("alpha")) alpha = obs.number("alpha");
        }
    }
    c.input = tensor_q(in, s.key, dtype);

    // The output: the tensor the op writes, quantized where something reads it next.
    int64_t out_id = -1;
    if (r.has("output_tensor_infos")) {
        const json &outs = r.array("output_tensor_infos");
        if (!outs.empty() && outs[0].is_object() && outs[0].contains("id"))
            out_id = JsonReader(outs[0], where, r.join("output_tensor_infos[0]"), kHint).integer("id");
    }
    const TensorQ *out = nullptr;
    if (out_id >= 0) {
        out = op.relu ? tensors.after_relu(out_id) : nullptr;
        if (!out) out = tensors.find(out_id);
    }
    if (out) {
        c.output = *out;
        c.add = fused_add(op, out_id, tensors);
    } else {
        const QParams q = qparams_for_range(output_bound(op, c.input), QDtype::u8);
        c.output.dtype = QDtype::u8;
        c.output.scale = q.scale;
        c.output.zero_point = q.zero_point;
        log::warn(where + ": op '" + op.id + "' (" + s.where + "): the summary does not quantize its output (IPEX "
                  "keeps it in float); its range is bounded from the input range and the weights, which costs "
                  "precision: calibrate the model with 'ipex-tool calibrate' for a measured range");
    }
    return c;
}

}  // namespace

bool is_ipex_summary(const json &j) {
    if (!j.is_object() || j.empty() || j.contains("format")) return false;
    for (const auto &[k, v] : j.items())
        if (!v.is_object() || !v.contains("q_op_infos")) return false;
    return true;
}

QConfig qconfig_from_ipex_summary(const json &summary, const PreparedModel &prepared, const std::string &where) {
    TensorTable tensors;
    std::vector<SummaryOp> entries;
    read_summary(summary, where, tensors, entries);

    // Our ops by (module, kind), in program order; the summary's entries take them in order.
    std::map<std::pair<std::string, std::string>, std::vector<const QuantOp *>> ours;
    for (const auto &op : prepared.ops) ours[{op.module, op.kind}].push_back(&op);
    std::map<std::pair<std::string, std::string>, size_t> taken;
    QConfig config;
    config.identity = prepared.identity;
    config.source = where;
    config.recipe = {{"ipex_qconf_summary", where}};
    std::map<std::string, bool> listed;
    for (const SummaryOp &s : entries) {
        const std::pair<std::string, std::string> key{s.fqn, s.kind};
        size_t &n = taken[key];
        auto it = ours.find(key);
        if (it == ours.end() || n >= it->second.size()) {
            std::string known;
            for (const auto &op : prepared.ops) known += (known.empty() ? "" : ", ") + op.id;
            throw_bad_input(where + ": " + s.where + " matches no quantizable op of this model (" +
                            (it == ours.end() ? "no " + s.kind + " in module '" + s.fqn + "'"
                                              : "module '" + s.fqn + "' has " + std::to_string(it->second.size()) + " " +
                                                    s.kind + " op(s)") +
                            "; the model's quantizable ops: " + (known.empty() ? "none" : known) +
                            "); the summary was saved for another model: calibrate this one with 'ipex-tool calibrate'");
        }
        const QuantOp &op = *it->second[n++];
        config.ops.push_back(convert_op(s, op, tensors, where, config.smooth_quant_alpha));
        listed[op.id] = true;
    }
    std::string unlisted;
    for (const auto &op : prepared.ops)
        if (!listed.count(op.id)) unlisted += (unlisted.empty() ? "" : ", ") + op.id;
    if (!unlisted.empty()) log::warn(where + ": the summary has no entry for " + unlisted + "; they stay in fp32");
    return config;
}

QConfig load_qconfig_for_model(const std::string &path, const torch::jit::Module &model) {
    check_input_file(path, "qconfig");
    const std::string text = read_bounded_file(path, kMaxQConfigBytes, "qconfig");
    const json j = parse_json(text, path, "a qconfig is the JSON file 'ipex-tool calibrate' writes");
    if (j.is_object() && j.contains("format")) return parse_qconfig(text, path);
    if (!is_ipex_summary(j))
        throw_bad_input(path + ": is not a qconfig: neither ipex-tool's (an object with \"format\": \"" +
                        std::string(kQConfigFormat) + "\") nor IPEX's qconfig summary (an object of modules, each "
                        "with \"q_op_infos\"); make one with 'ipex-tool calibrate'");
    const PreparedModel prepared = prepare_for_quantization(model);
    return qconfig_from_ipex_summary(j, prepared, path);
}

}  // namespace ipex::quant
