#include "model/inspect.h"

#include <torch/csrc/jit/passes/inliner.h>

#include <algorithm>
#include <cstring>
#include <iomanip>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "core/tensor_spec.h"
#include "ir/graph_utils.h"

namespace ipex::model {
namespace {

constexpr const char *kTorchPrefix = "__torch__.";
constexpr const char *kIpexNamespace = "ipex";

// Namespaces of operators that ship with stock libtorch.
bool is_stock_namespace(const std::string &ns) {
    static const std::set<std::string> stock = {"aten", "prim", "quantized", "_quantized",
                                                "_caffe2", "profiler", "cuda", "onednn"};
    return stock.count(ns) > 0;
}

// "__torch__.torch.nn.modules.conv.___torch_mangle_3.Conv2d" -> "torch.nn.modules.conv.Conv2d"
std::string strip_torch_prefix(const std::string &name) {
    std::string out = name.rfind(kTorchPrefix, 0) == 0 ? name.substr(std::strlen(kTorchPrefix)) : name;
    static const std::regex mangle(R"(___torch_mangle_\d+\.)");
    return std::regex_replace(out, mangle, "");
}

struct WeightTally {
    std::map<std::string, std::pair<int64_t, int64_t>> by_dtype;  // elements, bytes
    int64_t tensors = 0;
    std::set<const void *> seen;

    void add(const at::Tensor &t) {
        if (!t.defined() || !t.has_storage()) return;
        if (!seen.insert(t.storage().data()).second) return;  // shared storage counted once
        auto &entry = by_dtype[dtype_name(t.scalar_type())];
        entry.first += t.numel();
        entry.second += static_cast<int64_t>(t.numel() * t.element_size());
        tensors += 1;
    }
};

// Tensors in a constant: plain, in tuples/lists, or in the pickled state of an object such as
// a prepacked context (its __getstate__ gives the plain weights).
void tally_ivalue(const c10::IValue &value, WeightTally &tally) {
    if (value.isTensor()) {
        tally.add(value.toTensor());
    } else if (value.isTuple()) {
        for (const auto &e : value.toTupleRef().elements()) tally_ivalue(e, tally);
    } else if (value.isList()) {
        for (const auto &e : value.toListRef()) tally_ivalue(e, tally);
    } else if (value.isObject()) {
        if (auto *getstate = value.toObjectRef().type()->findMethod("__getstate__"))
            tally_ivalue((*getstate)({value}), tally);
    }
}

void tally_graph_constants(const torch::jit::Block *block, WeightTally &tally) {
    for (const auto *node : block->nodes()) {
        if (node->kind() == torch::jit::prim::Constant) {
            if (auto iv = torch::jit::toIValue(node->output()); iv && (iv->isTensor() || iv->isObject()))
                tally_ivalue(*iv, tally);
        }
        for (const auto *sub : node->blocks()) tally_graph_constants(sub, tally);
    }
}

bool has_getattr(const torch::jit::Block *block) {
    for (const auto *node : block->nodes()) {
        if (node->kind() == torch::jit::prim::GetAttr) return true;
        for (const auto *sub : node->blocks())
            if (has_getattr(sub)) return true;
    }
    return false;
}

}  // namespace

std::shared_ptr<torch::jit::Graph> inlined_forward(const torch::jit::Module &module) {
    auto graph = module.get_method("forward").graph()->copy();
    torch::jit::Inline(*graph);
    return graph;
}

namespace {

// The floating dtype holding the most weight bytes.
std::string dominant_float_dtype(const WeightTally &tally) {
    int64_t best = -1;
    std::string dtype = "fp32";
    for (const auto &[name, entry] : tally.by_dtype) {
        if ((name == "fp32" || name == "bf16" || name == "fp16") && entry.second > best) {
            best = entry.second;
            dtype = name;
        }
    }
    return dtype;
}

std::optional<std::string> recorded_dtype(const LoadedModel &model) {
    if (model.metadata && model.metadata->contains("dtype") && (*model.metadata)["dtype"].is_string())
        return (*model.metadata)["dtype"].get<std::string>();
    return std::nullopt;
}

}  // namespace

std::string compute_dtype(const LoadedModel &model) {
    if (auto recorded = recorded_dtype(model)) return *recorded;
    WeightTally tally;
    tally_graph_constants(inlined_forward(model.module)->block(), tally);
    for (const auto &p : model.module.named_parameters(true)) tally.add(p.value);
    return dominant_float_dtype(tally);
}

std::string precision_dtype(const LoadedModel &model) {
    const auto &meta = model.metadata;
    if (meta && meta->contains("fp32_math_mode") && (*meta)["fp32_math_mode"] == "bf32") return "bf16";
    return compute_dtype(model);
}

nlohmann::json inspect_model(const LoadedModel &model) {
    const auto &module = model.module;
    nlohmann::json report;
    report["file"] = model.path;
    report["file_bytes"] = model.bytes;

    std::vector<std::string> methods;
    for (const auto &m : module.get_methods()) methods.push_back(m.name());
    report["methods"] = methods;
    const auto forward = module.get_method("forward");
    {
        std::ostringstream schema;
        schema << forward.function().getSchema();
        report["forward_schema"] = schema.str();
    }

    auto graph = inlined_forward(module);
    const auto histogram = passes::op_histogram(*graph);
    report["op_histogram"] = histogram;
    report["node_count"] = [&] {
        int n = 0;
        for (const auto &kv : histogram) n += kv.second;
        return n;
    }();

    WeightTally tally;
    for (const auto &p : module.named_parameters(true)) tally.add(p.value);
    for (const auto &b : module.named_buffers(true)) tally.add(b.value);
    tally_graph_constants(graph->block(), tally);
    int64_t elements = 0, bytes = 0;
    nlohmann::json by_dtype = nlohmann::json::object();
    for (const auto &[dtype, entry] : tally.by_dtype) {
        by_dtype[dtype] = {{"count", entry.first}, {"bytes", entry.second}};
        elements += entry.first;
        bytes += entry.second;
    }
    report["parameters"] = {
        {"count", elements}, {"bytes", bytes}, {"tensors", tally.tensors}, {"by_dtype", by_dtype}};

    std::map<std::string, int> submodules;
    for (const auto &m : module.named_modules()) {
        if (m.name.empty()) continue;  // the model itself
        submodules[strip_torch_prefix(m.value.type()->name()->qualifiedName())] += 1;
    }
    report["submodules"] = submodules;
    report["type"] = strip_torch_prefix(module.type()->name()->qualifiedName());

    const bool has_params = module.named_parameters(true).size() > 0;
    report["frozen"] = !has_params && !has_getattr(graph->block());
    if (module.hasattr("training")) report["training"] = module.is_training();
    else report["training"] = false;

    std::set<std::string> custom_ops;
    bool needs_ipex = false;
    for (const auto &[op, count] : histogram) {
        const auto sep = op.find("::");
        const std::string ns = sep == std::string::npos ? op : op.substr(0, sep);
        if (!is_stock_namespace(ns)) {
            custom_ops.insert(op);
            if (ns == kIpexNamespace) needs_ipex = true;
        }
    }
    report["custom_ops"] = std::vector<std::string>(custom_ops.begin(), custom_ops.end());
    report["needs_ops_library"] = needs_ipex;
    report["runs_on"] = needs_ipex ? "ipex_ops" : (custom_ops.empty() ? "stock" : "stock+custom");
    report["dtype"] = recorded_dtype(model).value_or(dominant_float_dtype(tally));
    report["ipex"] = model.metadata ? *model.metadata : nlohmann::json(nullptr);
    // What optimize rewrote (decompositions, fusions, prepacked ops), as it counted them, and
    // the ipex ops that carry the result.
    nlohmann::json rewrites = nlohmann::json::object();
    if (model.metadata && model.metadata->contains("passes") && (*model.metadata)["passes"].is_object())
        for (const auto &[pass, count] : (*model.metadata)["passes"].items())
            if (count.is_number_integer() && count.get<int64_t>() > 0) rewrites[pass] = count;
    report["rewrites"] = rewrites;
    nlohmann::json fused = nlohmann::json::object();
    for (const auto &[op, count] : histogram)
        if (op.rfind(std::string(kIpexNamespace) + "::", 0) == 0) fused[op] = count;
    report["ipex_ops"] = fused;
    return report;
}

std::string format_inspect(const nlohmann::json &r) {
    std::ostringstream out;
    out << "model:        " << r["file"].get<std::string>() << " (" << r["file_bytes"].get<uint64_t>()
        << " bytes)\n";
    out << "type:         " << r["type"].get<std::string>() << "\n";
    out << "forward:      " << r["forward_schema"].get<std::string>() << "\n";
    out << "methods:      ";
    for (size_t i = 0; i < r["methods"].size(); ++i) out << (i ? ", " : "") << r["methods"][i].get<std::string>();
    out << "\n";
    out << "frozen:       " << (r["frozen"].get<bool>() ? "yes" : "no") << "\n";
    out << "training:     " << (r["training"].get<bool>() ? "yes (optimize switches it to eval)" : "no")
        << "\n";
    out << "dtype:        " << r["dtype"].get<std::string>() << "\n";
    const auto &p = r["parameters"];
    out << "weights:      " << p["count"].get<int64_t>() << " elements, " << p["bytes"].get<int64_t>()
        << " bytes in " << p["tensors"].get<int64_t>() << " tensors\n";
    for (const auto &[dtype, e] : p["by_dtype"].items())
        out << "  " << std::left << std::setw(10) << dtype << e["count"].get<int64_t>() << " elements, "
            << e["bytes"].get<int64_t>() << " bytes\n";
    out << "runs on:      "
        << (r["needs_ops_library"].get<bool>() ? "needs libipex_ops.so (ipex-tool loads it itself)"
                                                : "stock PyTorch/libtorch")
        << "\n";
    if (!r["custom_ops"].empty()) {
        out << "custom ops:  ";
        for (const auto &op : r["custom_ops"]) out << " " << op.get<std::string>();
        out << "\n";
    }
    if (!r["submodules"].empty()) {
        out << "submodules:\n";
        for (const auto &[type, n] : r["submodules"].items())
            out << "  " << std::setw(5) << std::right << n.get<int>() << "  " << type << "\n";
    }
    out << "ops (" << r["node_count"].get<int>() << " nodes in the inlined forward):\n";
    std::vector<std::pair<int, std::string>> ops;
    for (const auto &[op, n] : r["op_histogram"].items()) ops.emplace_back(n.get<int>(), op);
    std::sort(ops.begin(), ops.end(), [](auto &a, auto &b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
    for (const auto &[n, op] : ops) out << "  " << std::setw(5) << std::right << n << "  " << op << "\n";
    if (r.contains("rewrites") && !r["rewrites"].empty()) {
        out << "rewrites:     ";
        bool first = true;
        for (const auto &[pass, n] : r["rewrites"].items()) {
            out << (first ? "" : ", ") << pass << " " << n.get<int64_t>();
            first = false;
        }
        out << "\n";
    }
    if (!r["ipex"].is_null()) {
        out << "optimized by ipex-tool: dtype " << r["ipex"].value("dtype", "?") << ", level "
            << r["ipex"].value("level", "?") << ", from " << r["ipex"].value("source", "?") << "\n";
    }
    return out.str();
}

}  // namespace ipex::model
