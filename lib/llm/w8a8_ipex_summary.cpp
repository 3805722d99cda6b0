#include "llm/w8a8_ipex_summary.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <vector>

#include "base/errors.h"
#include "base/json_io.h"
#include "llm/w8a8_config.h"

namespace ipex::llm {
namespace {

using nlohmann::json;

const char *const kHint = "the file is IPEX's qconfig summary (save_qconf_summary after SmoothQuant calibration); "
                          "fix the entry, or calibrate this model with 'ipex-tool calibrate-llm'";
constexpr int kProjections = 4;                      // qkv, o, gate_up, down (w8a8_projection_names)
constexpr int kParts[kProjections] = {3, 1, 2, 1};   // the modules each merges
constexpr int kWhole = -1;                           // an entry for the merged projection itself
constexpr double kSameFactor = 1e-6;                 // relative: parts of one projection agree

struct Role {
    const char *module;  // after "layers.L."
    int projection, part;
};
// IPEX's reference decoder layers (ipex.llm.optimize before static quantization) hold o_proj as
// mha_linear_add.linear, down_proj as mlp_linear_add.linear, gate/up as linear_silu_mul.linear_s/_m.
const Role kRoles[] = {
    {"self_attn.q_proj", 0, 0},          {"self_attn.k_proj", 0, 1},          {"self_attn.v_proj", 0, 2},
    {"self_attn.qkv_proj", 0, kWhole},   {"self_attn.o_proj", 1, 0},          {"mha_linear_add.linear", 1, 0},
    {"mlp.gate_proj", 2, 0},             {"mlp.up_proj", 2, 1},               {"linear_silu_mul.linear_s", 2, 0},
    {"linear_silu_mul.linear_m", 2, 1},  {"mlp.gate_up_proj", 2, kWhole},     {"mlp.down_proj", 3, 0},
    {"mlp_linear_add.linear", 3, 0},
};

// One linear's entry as read.
struct Part {
    std::string where;           // "'key' q_op_infos['3'] (fqn '...')"
    std::vector<double> smooth;  // our s (W * s, X / s); empty: 1
    double act_scale = 1;
};

// "model.layers.12.mlp.down_proj" -> layer 12, "mlp.down_proj"; false when it names no layer.
bool split_fqn(const std::string &fqn, int64_t &layer, std::string &rest) {
    for (size_t pos = fqn.find("layers."); pos != std::string::npos; pos = fqn.find("layers.", pos + 1)) {
        if (pos != 0 && fqn[pos - 1] != '.') continue;
        size_t i = pos + 7, digits = 0;
        int64_t l = 0;
        while (i < fqn.size() && std::isdigit(static_cast<unsigned char>(fqn[i])) && digits < 9) {
            l = l * 10 + (fqn[i++] - '0');
            ++digits;
        }
        if (digits == 0 || i >= fqn.size() || fqn[i] != '.') continue;
        layer = l;
        rest = fqn.substr(i + 1);
        return true;
    }
    return false;
}

// A value that IPEX writes either as is or, for an input shared by several linears, as an
// object keyed "<op index>_<weight id>": the entry of this op (or the only one).
const json &keyed(const JsonReader &r, const char *field, const std::string &op_key) {
    const json &v = r.get(field);
    if (!v.is_object()) return v;
    if (v.empty()) r.fail(field, "is an empty object");
    if (v.size() == 1) return v.begin().value();
    for (const auto &[k, x] : v.items())
        if (k.rfind(op_key + "_", 0) == 0) return x;
    r.fail(field, "has no entry \"" + op_key + "_<weight id>\" for this op (its keys name other ops)");
}

double one_number(const JsonReader &r, const char *field, const std::string &op_key) {
    const json &v = keyed(r, field, op_key);
    if (!v.is_array() || v.size() != 1 || !v[0].is_number())
        r.fail(field, "must be a list of one number (a per-tensor parameter)");
    const double x = v[0].get<double>();
    if (!std::isfinite(x)) r.fail(field, "must be finite");
    return x;
}

// Per input channel factors, in_features of them, each finite and > 0 in fp32 (inverted when
// `invert`: IPEX's activation factors are 1/s).
std::vector<double> factors(const JsonReader &r, const json &a, const char *field, int64_t in_features, bool invert) {
    if (!a.is_array()) r.fail(field, "must be a list of numbers (got " + json_type_name(a) + ")");
    if (static_cast<int64_t>(a.size()) != in_features)
        r.fail(field, "has " + std::to_string(a.size()) + " channels, the model's projection has " +
                          std::to_string(in_features));
    std::vector<double> out;
    out.reserve(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
        const std::string at = std::string(field) + "[" + std::to_string(i) + "]";
        if (!a[i].is_number()) r.fail(at, "is " + json_type_name(a[i]) + ", not a number");
        double x = a[i].get<double>();
        if (!std::isfinite(x) || !(x > 0)) r.fail(at, "is " + json(x).dump() + " (a smoothing factor must be > 0)");
        if (invert) x = 1.0 / x;
        const auto f = static_cast<float>(x);
        if (!std::isfinite(f) || !(f > 0))
            r.fail(at, "is " + json(a[i].get<double>()).dump() + ", outside fp32's range as a smoothing factor");
        out.push_back(f);
    }
    return out;
}

Part read_part(const json &info, const std::string &where, const std::string &entry, const std::string &op_key,
               int64_t in_features) {
    const JsonReader r(info, where, entry, kHint);
    const json &inputs = r.array("input_tensor_infos");
    if (inputs.empty() || !inputs[0].is_object() || inputs[0].empty())
        r.fail("input_tensor_infos", "has no first input (the activation the linear reads)");
    const JsonReader in(inputs[0], where, r.join("input_tensor_infos[0]"), kHint);
    const std::string dtype = in.str_or("force_dtype", in.str_or("inf_dtype", ""));
    if (dtype.empty()) in.fail("force_dtype", "and inf_dtype are missing: the summary does not say the input is int8");
    int64_t qmin = 0, qmax = 255;
    if (dtype == "torch.qint8") {
        qmin = -128;
        qmax = 127;
    } else if (dtype != "torch.quint8") {
        throw_unsupported(where + ": " + entry + " keeps the linear's input in " + dtype + " (" +
                          (in.has("force_dtype") ? "force_dtype" : "inf_dtype") +
                          "); W8A8 quantizes every projection of every layer: make the summary with all linears "
                          "int8, or calibrate with 'ipex-tool calibrate-llm'");
    }
    if (!in.has("scale")) in.fail("scale", "is missing: the summary has no activation scale for this linear");
    if (!in.has("zero_point")) in.fail("zero_point", "is missing: the summary has no activation zero point");
    const double scale = one_number(in, "scale", op_key);
    if (!(scale > 0) || !std::isfinite(static_cast<float>(scale))) in.fail("scale", "must be > 0 and finite in fp32");
    const double zp = one_number(in, "zero_point", op_key);
    if (zp != std::floor(zp) || zp < static_cast<double>(qmin) || zp > static_cast<double>(qmax))
        in.fail("zero_point", json(zp).dump() + " is not an integer in [" + std::to_string(qmin) + ", " +
                                  std::to_string(qmax) + "] (" + dtype + ")");
    Part p;
    p.where = entry;
    const double reach = std::max(zp - static_cast<double>(qmin), static_cast<double>(qmax) - zp);
    p.act_scale = reach <= 128 ? scale : scale * reach / 127;

    const json *weight = nullptr;
    if (r.has("weight_tensor_infos")) {
        const json &w = r.array("weight_tensor_infos");
        if (!w.empty() && w[0].is_object()) weight = &w[0];
    }
    if (weight && weight->contains("smooth_quant_scaling_factor") && !(*weight)["smooth_quant_scaling_factor"].is_null()) {
        const JsonReader w(*weight, where, r.join("weight_tensor_infos[0]"), kHint);
        p.smooth = factors(w, w.get("smooth_quant_scaling_factor"), "smooth_quant_scaling_factor", in_features, false);
    } else if (in.has("smooth_quant_scaling_factor")) {
        p.smooth = factors(in, keyed(in, "smooth_quant_scaling_factor", op_key), "smooth_quant_scaling_factor",
                           in_features, true);
    }
    return p;
}

bool same_factors(const std::vector<double> &a, const std::vector<double> &b) {
    if (a.empty() || b.empty()) return a.empty() && b.empty();
    for (size_t j = 0; j < a.size(); ++j)
        if (std::fabs(a[j] - b[j]) > kSameFactor * std::max(std::fabs(a[j]), std::fabs(b[j]))) return false;
    return true;
}

}  // namespace

bool is_ipex_qconf_summary(const json &j) {
    if (!j.is_object() || j.empty()) return false;
    for (const auto &[k, v] : j.items())
        if (!v.is_object() || !v.contains("q_op_infos")) return false;
    return true;
}

std::map<std::string, W8A8Spec> w8a8_from_ipex_summary(const json &summary, const ModelConfig &c,
                                                       const std::string &where) {
    const int64_t in[kProjections] = {c.hidden_size, c.num_heads * c.head_dim, c.hidden_size, c.intermediate_size};
    // (layer, projection) -> part -> what the summary says
    std::map<std::pair<int64_t, int>, std::map<int, Part>> found;
    for (const auto &[module, entry] : summary.items()) {
        const JsonReader m(entry, "'" + where + "'", "'" + module + "'", kHint);
        const JsonReader ops = m.object("q_op_infos");
        for (const auto &[op_key, info] : ops.value().items()) {
            const std::string at = m.join("q_op_infos['" + op_key + "']");
            const JsonReader op(info, "'" + where + "'", at, kHint);
            if (!op.has("fqn")) continue;  // not a module's op: nothing to map
            const std::string fqn = op.str("fqn");
            int64_t layer = 0;
            std::string rest;
            if (!split_fqn(fqn, layer, rest)) continue;  // lm_head and the like stay in floating point
            const Role *role = nullptr;
            for (const Role &x : kRoles)
                if (rest == x.module) role = &x;
            if (!role) continue;  // attention matmuls, norms
            if (layer >= c.num_layers)
                op.fail("fqn", "'" + fqn + "' names layer " + std::to_string(layer) + " but the model has " +
                                   std::to_string(c.num_layers) + " layers; the summary was saved for another model");
            const std::string entry_name = at + " (fqn '" + fqn + "')";
            auto &parts = found[{layer, role->projection}];
            if (parts.count(role->part))
                op.fail("fqn", "'" + fqn + "' has two entries (" + parts.at(role->part).where + " and this one)");
            parts.emplace(role->part, read_part(info, "'" + where + "'", entry_name, op_key, in[role->projection]));
        }
    }
    std::map<std::string, W8A8Spec> specs;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const std::vector<std::string> names = w8a8_projection_names(l);
        for (int p = 0; p < kProjections; ++p) {
            const auto it = found.find({l, p});
            std::vector<const Part *> parts;
            if (it != found.end() && it->second.count(kWhole) && it->second.size() == 1) {
                parts.push_back(&it->second.at(kWhole));
            } else {
                for (int part = 0; part < kParts[p]; ++part) {
                    if (it == found.end() || !it->second.count(part)) {
                        std::string modules;
                        for (const Role &x : kRoles)
                            if (x.projection == p && x.part == (kParts[p] == 1 ? 0 : part))
                                modules += std::string(modules.empty() ? "" : " or ") + "model.layers." +
                                           std::to_string(l) + "." + x.module;
                        throw_bad_input("'" + where + "': no q_op_infos entry with fqn " + modules + " (our " + names[p] +
                                        " needs it); " + kHint);
                    }
                    parts.push_back(&it->second.at(part));
                }
            }
            W8A8Spec s;
            s.act_scale = 0;
            for (const Part *part : parts) {
                if (!same_factors(part->smooth, parts[0]->smooth))
                    throw_unsupported("'" + where + "': " + part->where + " and " + parts[0]->where +
                                      " read one input but carry different smoothing factors (IPEX's "
                                      "share_weight_observers=False); " + names[p] +
                                      " runs them as one matmul on one smoothed input: calibrate with "
                                      "share_weight_observers=True or with 'ipex-tool calibrate-llm'");
                s.act_scale = std::max(s.act_scale, part->act_scale);
            }
            const std::vector<double> &f = parts[0]->smooth;
            s.smooth = f.empty() ? at::ones({in[p]}, at::kFloat) : at::tensor(f, at::kDouble).to(at::kFloat);
            s.folded_into_norm = p % 2 == 0;  // qkv, gate_up: an RMSNorm's output
            specs.emplace(names[p], std::move(s));
        }
    }
    return specs;
}

}  // namespace ipex::llm
