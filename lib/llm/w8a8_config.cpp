#include "llm/w8a8_config.h"

#include <ATen/ATen.h>

#include <cmath>

#include "base/errors.h"
#include "base/json_io.h"
#include "llm/model.h"
#include "llm/w8a8_ipex_summary.h"

namespace ipex::llm {
namespace {

constexpr uint64_t kMaxQconfigBytes = uint64_t(256) << 20;
constexpr double kActMax = 127;
const char *const kHint = "a W8A8 qconfig is the JSON file 'ipex-tool calibrate-llm' writes for this model";

std::vector<float> floats(const JsonReader &r, const char *field, int64_t count) {
    const nlohmann::json &a = r.array(field);
    if (static_cast<int64_t>(a.size()) != count)
        r.fail(field, "has " + std::to_string(a.size()) + " channels, the model's projection has " +
                          std::to_string(count));
    std::vector<float> out;
    out.reserve(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].is_number())
            r.fail(std::string(field) + "[" + std::to_string(i) + "]", "is " + json_type_name(a[i]) + ", not a number");
        const double v = a[i].get<double>();
        if (!std::isfinite(v) || !(v > 0) || !std::isfinite(static_cast<float>(v)))
            r.fail(std::string(field) + "[" + std::to_string(i) + "]",
                   "is " + std::to_string(v) + " (a smoothing factor must be a finite number > 0)");
        out.push_back(static_cast<float>(v));
    }
    return out;
}

}  // namespace

std::vector<std::string> w8a8_projection_names(int64_t layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    return {p + "self_attn.qkv_proj", p + "self_attn.o_proj", p + "mlp.gate_up_proj", p + "mlp.down_proj"};
}

nlohmann::json w8a8_config_json(const std::vector<W8A8Observation> &observed, double alpha, int64_t tokens,
                                const ModelConfig &config) {
    nlohmann::json layers = nlohmann::json::object();
    for (const auto &o : observed) {
        const size_t k = o.act_max.size();
        TORCH_INTERNAL_ASSERT(o.weight_max.size() == k, "w8a8_config_json: channel counts differ");
        std::vector<double> smooth(k);
        double top = 0;
        for (size_t j = 0; j < k; ++j) {
            if (!std::isfinite(o.act_max[j]))
                throw_bad_input("calibration of '" + o.name + "': input channel " + std::to_string(j) +
                                " reached " + std::to_string(o.act_max[j]) +
                                " (the fp32 model gives NaN/Inf on this text; check the checkpoint)");
            smooth[j] = std::pow(static_cast<double>(o.act_max[j]) + kSmoothEps, alpha) /
                        std::pow(static_cast<double>(o.weight_max[j]) + kSmoothEps, 1 - alpha);
            // The factor as the loader will read it (fp32), so the scale covers what it divides.
            smooth[j] = static_cast<double>(static_cast<float>(smooth[j]));
            top = std::max(top, static_cast<double>(o.act_max[j]) / smooth[j]);
        }
        const double act_scale = top > 0 ? top / kActMax : 1.0;
        layers[o.name] = {{"in_features", k},  {"act_max", o.act_max}, {"weight_max", o.weight_max},
                          {"smooth", smooth},  {"act_scale", act_scale}};
    }
    return {{"format", kW8A8Format},
            {"version", kW8A8Version},
            {"alpha", alpha},
            {"tokens", tokens},
            {"model",
             {{"architecture", config.architecture},
              {"num_layers", config.num_layers},
              {"hidden_size", config.hidden_size},
              {"intermediate_size", config.intermediate_size}}},
            {"activation", {{"dtype", "int8"}, {"qscheme", "per_tensor_symmetric"}}},
            {"weight", {{"dtype", "int8"}, {"qscheme", "per_channel_symmetric"}}},
            {"layers", layers}};
}

std::map<std::string, W8A8Spec> read_w8a8_config(const std::string &path, const ModelConfig &c) {
    check_w8a8_model(c);
    return w8a8_config_from_json(read_json_object(path, kMaxQconfigBytes, "--qconfig file", kHint), c, path);
}

void check_w8a8_model(const ModelConfig &c) {
    for (int64_t l = 0; l < c.num_layers; ++l)
        if (c.sparse(l))
            throw_unsupported("--qconfig: W8A8 of mixture-of-experts layers is not supported (layer " +
                              std::to_string(l) + " of this " + c.architecture +
                              " is sparse); use --woq-dtype int8 for this model");
}

std::map<std::string, W8A8Spec> w8a8_config_from_json(const nlohmann::json &j, const ModelConfig &c,
                                                      const std::string &path) {
    check_w8a8_model(c);
    if (!j.contains("format") && is_ipex_qconf_summary(j)) return w8a8_from_ipex_summary(j, c, path);
    const JsonReader top(j, "'" + path + "'", "", kHint);
    if (!top.has("format"))
        top.fail("format", "is missing: the file is neither ipex-tool's W8A8 qconfig (\"format\": \"" +
                               std::string(kW8A8Format) + "\") nor IPEX's qconfig summary (an object of modules, "
                               "each with \"q_op_infos\")");
    if (top.str("format") != kW8A8Format)
        top.fail("format", "is '" + top.str("format") + "', expected '" + kW8A8Format + "'");
    top.integer("version", kW8A8Version, kW8A8Version);
    const JsonReader layers = top.object("layers");
    std::map<std::string, W8A8Spec> specs;
    for (int64_t l = 0; l < c.num_layers; ++l) {
        const std::vector<std::string> names = w8a8_projection_names(l);
        const int64_t in[4] = {c.hidden_size, c.num_heads * c.head_dim, c.hidden_size, c.intermediate_size};
        for (size_t i = 0; i < names.size(); ++i) {
            const JsonReader r = layers.object(names[i].c_str());
            const int64_t k = r.integer("in_features");
            if (k != in[i])
                r.fail("in_features", "is " + std::to_string(k) + ", the model's projection has " +
                                          std::to_string(in[i]) + " input channels");
            W8A8Spec s;
            const std::vector<float> smooth = floats(r, "smooth", k);
            s.smooth = at::tensor(smooth, at::kFloat);
            s.act_scale = r.number("act_scale");
            if (!(s.act_scale > 0)) r.fail("act_scale", "must be > 0");
            s.folded_into_norm = i % 2 == 0;  // qkv, gate_up: an RMSNorm's output
            specs.emplace(names[i], std::move(s));
        }
    }
    return specs;
}

std::vector<std::shared_ptr<InputObserver>> Model::observers() const {
    std::vector<std::shared_ptr<InputObserver>> out;
    for (const auto &l : layers_)
        for (const Linear *p : {&l.qkv, &l.o, &l.gate_up, &l.down})
            if (p->observer()) out.push_back(p->observer());
    return out;
}

}  // namespace ipex::llm
