#include "checkpoint/import_checkpoint.h"

#include <ATen/ATen.h>

#include <set>

#include "base/errors.h"
#include "base/log.h"
#include "checkpoint/decoders.h"
#include "checkpoint/quant_config.h"
#include "checkpoint/safetensors.h"

namespace ipex::woq {
namespace {

bool ends_with(const std::string &s, const std::string &suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

at::Tensor optional_tensor(const Checkpoint &ck, const std::string &name) {
    return ck.has(name) ? ck.tensor(name) : at::Tensor();
}

// GPTQ or AWQ from the shapes of one layer when no config says so.
std::string method_from_shapes(const Checkpoint &ck, const std::string &layer) {
    if (ck.has(layer + ".g_idx")) return "gptq";
    if (!ck.has(layer + ".scales"))
        throw_bad_input("layer '" + layer + "' has a qweight but no scales; the checkpoint is incomplete");
    const auto &q = ck.info(layer + ".qweight").shape, &s = ck.info(layer + ".scales").shape;
    if (q.size() == 2 && s.size() == 2) {
        if (q[1] == s[1]) return "gptq";
        if (q[1] * 8 == s[1]) return "awq";
    }
    throw_bad_input("cannot tell whether '" + ck.directory() + "' is GPTQ or AWQ from layer '" + layer +
                    "' (no quantize_config.json/quant_config.json/config.json); run 'ipex-tool import gptq' or "
                    "'import awq'");
}

int bits_from_shapes(const Checkpoint &ck, const std::string &layer, const std::string &method) {
    if (method == "awq" || !ck.has(layer + ".qzeros")) return 4;
    const auto &q = ck.info(layer + ".qweight").shape, &z = ck.info(layer + ".qzeros").shape;
    if (q.size() == 2 && z.size() == 2 && q[1] > 0 && (z[1] * 32) % q[1] == 0) return static_cast<int>(z[1] * 32 / q[1]);
    return 4;
}

}  // namespace

ImportResult import_checkpoint(const std::string &path, const ImportOptions &options) {
    const Checkpoint ck(path);
    if (is_woq_checkpoint(ck))
        throw_usage("'" + path + "' is already an ipex-tool weight-only checkpoint; give it to optimize "
                    "--low-precision-checkpoint");
    const std::optional<QuantConfig> config = detect_quant_config(ck.directory());
    std::vector<std::string> layers;
    for (const auto &name : ck.names())
        if (ends_with(name, ".qweight")) layers.push_back(name.substr(0, name.size() - 8));
    if (layers.empty())
        throw_bad_input("checkpoint '" + path + "' holds no quantized layers (no '*.qweight' tensors); is it a GPTQ "
                        "or AWQ checkpoint?");

    std::string method = options.method;
    std::string method_from = "command line";
    if (method == "auto") {
        if (config && !config->method.empty()) {
            method = config->method;
            method_from = config->source;
        } else {
            method = method_from_shapes(ck, layers.front());
            method_from = "tensor shapes";
        }
    }
    DecodeSettings settings;
    settings.bits = options.bits ? options.bits
                                 : (config && config->bits ? config->bits : bits_from_shapes(ck, layers.front(), method));
    settings.group_size = options.group_size ? options.group_size : (config ? config->group_size : 0);
    std::string format = options.checkpoint_format;
    if (format.empty() && config) format = config->checkpoint_format;
    settings.gptq_v2 = method == "gptq" && format == "gptq_v2";
    if (method == "awq" && config && !config->awq_version.empty() && config->awq_version != "gemm")
        throw_unsupported("AWQ version '" + config->awq_version + "' (" + config->source +
                          ") is not supported; only the GEMM layout is; re-export the checkpoint with version GEMM");

    ImportResult result;
    for (const auto &f : ck.files()) result.files.push_back(f->path());
    std::set<std::string> used;
    int act_order = 0;
    uint64_t out_bytes = 0;
    std::set<int64_t> group_sizes;
    for (const auto &name : layers) {
        SourceLayer src;
        src.name = name;
        src.qweight = ck.tensor(name + ".qweight");
        src.qzeros = optional_tensor(ck, name + ".qzeros");
        src.scales = optional_tensor(ck, name + ".scales");
        src.g_idx = optional_tensor(ck, name + ".g_idx");
        src.bias = optional_tensor(ck, name + ".bias");
        for (const char *suffix : {".qweight", ".qzeros", ".scales", ".g_idx", ".bias"}) used.insert(name + suffix);
        WoqLayer layer = method == "gptq" ? decode_gptq(src, settings) : decode_awq(src, settings);
        act_order += layer.act_order;
        out_bytes += layer.bytes();
        group_sizes.insert(layer.source_group_size);
        log::verbose("imported " + name + " [" + std::to_string(layer.out_features) + "x" +
                     std::to_string(layer.in_features) + "]");
        result.checkpoint.layers.emplace(name, std::move(layer));
    }
    // Unquantized 2-D weights of other modules (lm_head, embeddings) mark modules the
    // checkpoint deliberately keeps in full precision.
    int other = 0;
    for (const auto &name : ck.names()) {
        if (used.count(name)) continue;
        ++other;
        if (ends_with(name, ".weight") && ck.info(name).shape.size() == 2)
            result.checkpoint.full_precision.push_back(name.substr(0, name.size() - 7));
    }
    const std::string source_format = method == "awq" ? "awq_gemm" : (settings.gptq_v2 ? "gptq_v2" : "gptq");
    const int64_t group_size = group_sizes.size() == 1 ? *group_sizes.begin() : 0;
    result.checkpoint.source = {{"path", path},
                                {"method", method},
                                {"source_format", source_format},
                                {"bits", settings.bits},
                                {"group_size", group_size},
                                {"config", config ? config->source : ""}};
    result.summary = {{"checkpoint", path},
                      {"method", method},
                      {"method_from", method_from},
                      {"source_format", source_format},
                      {"zero_convention", method == "awq" ? "as stored" : (settings.gptq_v2 ? "as stored (v2)" : "stored zero - 1 (v1)")},
                      {"config", config ? config->source : ""},
                      {"bits", settings.bits},
                      {"group_size", group_size},
                      {"sym", config && config->sym ? nlohmann::json(*config->sym) : nlohmann::json(nullptr)},
                      {"layers", layers.size()},
                      {"act_order_layers", act_order},
                      {"full_precision_modules", result.checkpoint.full_precision},
                      {"other_tensors", other},
                      {"bytes_in", ck.bytes()},
                      {"bytes_out", out_bytes}};
    return result;
}

ImportResult load_low_precision_checkpoint(const std::string &path) {
    const Checkpoint ck(path);
    if (!is_woq_checkpoint(ck)) return import_checkpoint(path, ImportOptions{});
    ImportResult result;
    for (const auto &f : ck.files()) result.files.push_back(f->path());
    result.checkpoint = read_woq_checkpoint(ck);
    result.summary = {{"checkpoint", path}, {"layers", result.checkpoint.layers.size()}, {"source", result.checkpoint.source}};
    return result;
}

}  // namespace ipex::woq
