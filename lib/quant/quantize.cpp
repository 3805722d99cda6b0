#include "quant/quantize.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <map>

#include "base/errors.h"
#include "base/log.h"
#include "passes/fuse_channel_shuffle.h"
#include "quant/convert_static.h"
#include "quant/int8_grouping.h"
#include "quant/mixed_bf16.h"
#include "quant/quant_graph.h"
#include "quant/smooth_quant.h"

namespace ipex::quant {
namespace {

[[noreturn]] void op_error(const std::string &where, const OpConfig &op, const std::string &what) {
    throw_bad_input(where + ": op '" + op.id + "' " + what + "; make a new qconfig with 'ipex-tool calibrate'");
}

// Every precondition of the conversion, checked before the graph changes.
void check_against_model(const PreparedModel &prepared, const QConfig &config, const std::string &where) {
    if (config.identity != prepared.identity)
        throw_bad_input(where + ": made for another model (identity " + config.identity + ", this model is " +
                        prepared.identity + "); run 'ipex-tool calibrate' on this model");
    std::map<std::string, const QuantOp *> by_id;
    for (const auto &op : prepared.ops) by_id[op.id] = &op;
    for (const auto &cfg : config.ops) {
        auto it = by_id.find(cfg.id);
        if (it == by_id.end()) op_error(where, cfg, "is not a quantizable op of this model (unknown op id)");
        const QuantOp &op = *it->second;
        if (cfg.kind != op.kind) op_error(where, cfg, "kind is " + cfg.kind + " but the model has " + op.kind);
        const auto out_channels = static_cast<size_t>(op.weight.size(0));
        if (cfg.weight.scales.size() != out_channels)
            op_error(where, cfg, "weight.scales holds " + std::to_string(cfg.weight.scales.size()) +
                                     " channels but the weight has " + std::to_string(out_channels));
        if (!cfg.smooth_factors.empty()) {
            if (op.kind != "linear" && op.kind != "matmul")
                op_error(where, cfg, "has smooth_quant factors but only linear/matmul ops are smoothed");
            if (cfg.smooth_factors.size() != static_cast<size_t>(op.weight.size(1)))
                op_error(where, cfg, "smooth_quant.factors holds " + std::to_string(cfg.smooth_factors.size()) +
                                         " channels but the weight has " + std::to_string(op.weight.size(1)) +
                                         " input channels");
        }
        if (cfg.dtype == "int8" && cfg.add && !op.add)
            log::warn(where + ": op '" + cfg.id + "' has an add section but the model has no add after it");
    }
}

void apply_recorded_smoothing(PreparedModel &prepared, const QConfig &config, const std::string &where) {
    bool any = false;
    for (const auto &group : smooth_groups(prepared.ops)) {
        const OpConfig *first = config.find(prepared.ops[group.ops.front()].id);
        const std::vector<double> factors = first ? first->smooth_factors : std::vector<double>{};
        for (size_t k : group.ops) {
            const OpConfig *cfg = config.find(prepared.ops[k].id);
            const std::vector<double> mine = cfg ? cfg->smooth_factors : std::vector<double>{};
            if (mine != factors)
                throw_bad_input(where + ": ops '" + prepared.ops[group.ops.front()].id + "' and '" +
                                prepared.ops[k].id + "' read the same input and must have the same smooth_quant "
                                "factors; make a new qconfig with 'ipex-tool calibrate'");
        }
        if (factors.empty()) continue;
        apply_smoothing(*prepared.graph, group, prepared.ops, factors);
        any = true;
    }
    if (any) prepared.ops = find_quant_ops(prepared.graph);
}

nlohmann::json convert_dynamic(PreparedModel &prepared, const QuantizeOptions &options) {
    int converted = 0;
    auto &graph = *prepared.graph;
    for (const auto &op : prepared.ops) {
        if (op.kind != "linear" && op.kind != "matmul") continue;
        const c10::IValue packed = prepack_weight(op, per_channel_weight_scales(op.weight));
        torch::jit::WithInsertPoint guard(op.node);
        torch::jit::Value *w = graph.insertConstant(packed);
        torch::jit::Value *y = graph.insert(c10::Symbol::fromQualString("quantized::linear_dynamic"),
                                            {op.node->input(0), w, false});
        y->setType(op.node->output()->type());
        op.node->output()->replaceAllUsesWith(y);
        op.node->destroy();
        ++converted;
    }
    if (converted == 0)
        throw_unsupported("--dynamic quantizes linear layers (and matmul by a constant) and the model has none");
    int bf16 = 0;
    if (options.mixed_dtype == "bf16") {
        for (const auto &op : find_quant_ops(prepared.graph)) {
            run_op_in_bf16(graph, op);
            ++bf16;
        }
    }
    torch::jit::EliminateDeadCode(prepared.graph);
    return {{"mode", "dynamic"}, {"int8_ops", converted}, {"bf16_ops", bf16}};
}

}  // namespace

QuantizeResult quantize_model(const torch::jit::Module &model, const QConfig &config, const std::string &where,
                              const QuantizeOptions &options) {
    PreparedModel prepared = prepare_for_quantization(model);
    QuantizeResult result;
    if (options.dynamic) {
        result.report = convert_dynamic(prepared, options);
    } else {
        check_against_model(prepared, config, where);
        apply_recorded_smoothing(prepared, config, where);
        const ConvertCounts c = convert_static(*prepared.graph, prepared.ops, config, options.mixed_dtype,
                                                 !options.portable);
        result.report = {{"mode", "static"},     {"int8_ops", c.int8_ops},   {"fused_relu", c.fused_relu},
                         {"fused_add", c.fused_add}, {"kept_fp32", c.kept_fp32}, {"bf16_ops", c.bf16_ops},
                         {"int8_passthrough", c.int8_passthrough},
                         {"activation_maps", {{"int8", c.int8_maps}, {"fp32", c.fp32_maps}}},
                         {"int8_cat_norms", c.int8_cat_norms},
                         {"int8_gates", {{"means", c.int8_gate_means}, {"products", c.int8_gate_products}}}};
        if (options.mixed_dtype == "bf16") {
            const MixedBf16Result m = run_outside_int8_in_bf16(prepared.graph, c.fp32_nodes, !options.portable);
            result.report["mixed_bf16"] = {{"applied", m.applied}, {"compute_ops", m.compute_ops},
                                           {"bf16_edges", m.bf16_edges}, {"kept_fp32", m.kept_fp32}};
            if (!m.applied)
                log::info("--mixed-dtype bf16: no conv/linear/matmul runs outside the int8 regions; the ops "
                          "there stay fp32");
        }
        if (!options.portable) {  // residual blocks of int8 convolutions as ipex::int8_graph ops
            const passes::PassResult pooled = pool_int8_convolutions(prepared.graph);
            result.report["int8_conv_max_pools"] = {
                {"ops", pooled.count}, {"modules", pooled.modules}, {"fp32_inputs", pooled.details["fp32_inputs"]}};
            const passes::PassResult g = group_int8_convolutions(prepared.graph);
            result.report["int8_graphs"] = {{"graphs", g.count}, {"convolutions", g.details["convolutions"]},
                                            {"sums", g.details["sums"]}, {"modules", g.modules}};
            result.report["int8_dequantize_ops"] = dequantize_edges(prepared.graph).count;
            // The fp32 channel shuffles between int8 regions (ShuffleNet) as one gather each.
            result.report["channel_shuffles"] = passes::fuse_channel_shuffle(prepared.graph).count;
        }
    }
    result.report["nested_fp32"] = prepared.nested_fp32;
    for (const auto &n : prepared.nested_fp32) log::warn(n);
    result.report["portable"] = options.portable || options.dynamic;
    result.report["passes"] = prepared.report.value("passes", nlohmann::json::array());
    result.passes = prepared.passes;
    result.module = prepared.module;
    return result;
}

passes::OptimizeResult optimize_with_qconfig(const torch::jit::Module &model, const QConfig &config,
                                             const std::string &where, const passes::OptimizeOptions &options) {
    if (options.dtype == "fp16")
        throw_unsupported("--qconfig with --dtype fp16: ops outside int8 run in fp32 or bf16; use --dtype bf16");
    QuantizeOptions q;
    q.mixed_dtype = options.dtype;
    q.portable = options.portable;
    QuantizeResult r = quantize_model(model, config, where, q);
    passes::OptimizeResult result;
    result.module = r.module;
    result.passes = r.passes;
    result.prepacked = !q.portable;
    result.report["mode"] = q.portable ? "portable" : "prepacked";
    result.report["passes"] = r.report["passes"];
    r.report.erase("passes");
    result.report["quantize"] = r.report;
    result.report["warnings"] = nlohmann::json::array();
    return result;
}

}  // namespace ipex::quant
