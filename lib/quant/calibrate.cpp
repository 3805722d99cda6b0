#include "quant/calibrate.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/api/function_impl.h>

#include <algorithm>
#include <dirent.h>
#include <map>
#include <sys/stat.h>

#include "base/atomic_file.h"
#include "base/errors.h"
#include "core/run_errors.h"
#include "base/log.h"
#include "core/tensor_spec.h"
#include "quant/quant_graph.h"
#include "quant/smooth_quant.h"

namespace ipex::quant {
namespace {

using torch::jit::Value;

bool has_suffix(const std::string &s, const std::string &suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_batch_file(const std::string &name) { return has_suffix(name, ".pt") || has_suffix(name, ".npy"); }

// A function running `graph` with `values` returned as a second output (a tuple).
std::unique_ptr<torch::jit::GraphFunction> observing_function(torch::jit::Graph &graph,
                                                              const std::vector<Value *> &values) {
    // Methods return one value: (original output, (observed values...)).
    torch::jit::Value *original = graph.outputs().at(0);
    torch::jit::Node *observed = graph.insertNode(graph.createTuple(values));
    torch::jit::Node *both = graph.insertNode(graph.createTuple({original, observed->output()}));
    graph.eraseOutput(0);
    graph.registerOutput(both->output());
    std::shared_ptr<torch::jit::Graph> copy = graph.copy();
    graph.eraseOutput(0);
    graph.registerOutput(original);
    both->destroy();
    observed->destroy();
    return std::make_unique<torch::jit::GraphFunction>("calibrate", copy, nullptr);
}

// Runs every batch and hands the observed tensors to `sink` (one call per batch).
void run_batches(const torch::jit::Module &module, torch::jit::Graph &graph, const std::vector<Value *> &values,
                 const std::vector<std::string> &files, const CalibrateOptions &options, const char *what,
                 const std::function<void(const std::vector<at::Tensor> &)> &sink) {
    auto fn = observing_function(graph, values);
    const c10::FunctionSchema &schema = module.get_method("forward").function().getSchema();
    torch::NoGradGuard no_grad;
    for (size_t b = 0; b < files.size(); ++b) {
        const std::string &file = files[b];
        std::vector<c10::IValue> inputs = make_inputs({file}, 0);
        torch::jit::Stack stack;
        stack.emplace_back(module._ivalue());
        for (auto &in : inputs) stack.push_back(std::move(in));
        const std::string hint = "); batches must have the shapes and dtypes of the model's inputs";
        try {
            // As forward would: arguments a batch leaves out take their defaults (a mask that
            // is None), and a wrong count or type is named.
            schema.checkAndNormalizeInputs(stack);
            fn->run(stack);
        } catch (const Error &) {
            throw;
        } catch (const std::exception &e) {  // our ops', libtorch's, or raised by the model's own code
            rethrow_run_error(e, file + ": the model rejects this calibration batch (", hint);
        }
        const auto observed = stack.back().toTupleRef().elements().at(1).toTupleRef().elements();
        std::vector<at::Tensor> tensors;
        for (size_t i = 0; i < observed.size(); ++i) {
            if (!observed[i].isTensor() || !observed[i].toTensor().is_floating_point())
                throw_unsupported(file + ": a quantizable op's " + std::string(what) +
                                  " is not a floating-point tensor; cannot calibrate this model");
            tensors.push_back(observed[i].toTensor());
        }
        try {
            sink(tensors);
        } catch (const c10::Error &e) {
            throw_bad_input(file + ": " + readable_error(e) + " (a value observed during calibration)");
        }
        if (options.progress) options.progress(b + 1, files.size());
    }
}

// Channel maxima of |x| over every axis but the last (the linear's input features).
at::Tensor channel_absmax(const at::Tensor &x) {
    const at::Tensor flat = x.detach().to(at::kFloat).reshape({-1, x.size(-1)});
    return flat.abs().amax(0);
}

// SmoothQuant: first pass measures linear inputs per channel, then rewrites the graph.
std::map<std::string, std::vector<double>> smooth(PreparedModel &prepared, const std::vector<std::string> &files,
                                                  const CalibrateOptions &options, double alpha) {
    const std::vector<SmoothGroup> groups = smooth_groups(prepared.ops);
    std::map<std::string, std::vector<double>> by_op;
    if (groups.empty()) return by_op;
    std::vector<Value *> values;
    for (const auto &g : groups) values.push_back(g.input);
    std::vector<at::Tensor> maxima(groups.size());
    run_batches(prepared.module, *prepared.graph, values, files, options, "input",
                [&](const std::vector<at::Tensor> &tensors) {
                    for (size_t i = 0; i < tensors.size(); ++i) {
                        const at::Tensor m = channel_absmax(tensors[i]);
                        maxima[i] = maxima[i].defined() ? at::maximum(maxima[i], m) : m;
                    }
                });
    for (size_t i = 0; i < groups.size(); ++i) {
        std::vector<at::Tensor> weights;
        for (size_t k : groups[i].ops) weights.push_back(prepared.ops[k].weight);
        if (maxima[i].numel() != weights.front().size(1)) continue;  // not a feature-last input
        const std::vector<double> factors = smooth_factors(maxima[i], weights, alpha);
        const std::string folded = apply_smoothing(*prepared.graph, groups[i], prepared.ops, factors);
        for (size_t k : groups[i].ops) {
            by_op[prepared.ops[k].id] = factors;
            log::verbose("smooth-quant " + prepared.ops[k].id + ": 1/s folded into " + folded);
        }
    }
    prepared.ops = find_quant_ops(prepared.graph);
    return by_op;
}

TensorQ tensor_q(const Observer &obs, const Recipe &recipe) {
    TensorQ t;
    t.dtype = recipe.activation_dtype;
    const QParams q = qparams_for_range(obs.range(t.dtype), t.dtype);
    t.scale = q.scale;
    t.zero_point = q.zero_point;
    t.observer = recipe.activation_observer;
    return t;
}

}  // namespace

std::vector<std::string> list_batches(const std::string &spec) {
    struct stat st {};
    if (stat(spec.c_str(), &st) != 0)
        throw_bad_input("--data '" + spec + "': no such file or directory");
    if (!S_ISDIR(st.st_mode)) {
        check_input_file(spec, "calibration data");
        if (!is_batch_file(spec))
            throw_bad_input("--data '" + spec + "': calibration data must be .pt or .npy files (or a directory of them)");
        return {spec};
    }
    std::vector<std::string> names;
    DIR *dir = opendir(spec.c_str());
    if (!dir) throw_bad_input("--data '" + spec + "': cannot read the directory");
    while (const dirent *e = readdir(dir)) {
        const std::string name = e->d_name;
        if (name[0] == '.' || !is_batch_file(name)) continue;
        if (names.size() >= kMaxCalibrationFiles) {
            closedir(dir);
            throw_bad_input("--data '" + spec + "': more than " + std::to_string(kMaxCalibrationFiles) +
                            " files; use fewer batches");
        }
        names.push_back(name);
    }
    closedir(dir);
    if (names.empty())
        throw_bad_input("--data '" + spec + "': the directory holds no .pt or .npy batch; save batches with "
                        "torch.save or numpy.save");
    std::sort(names.begin(), names.end());
    std::vector<std::string> files;
    for (const auto &n : names) files.push_back(spec + (spec.back() == '/' ? "" : "/") + n);
    return files;
}

QConfig calibrate(const torch::jit::Module &model, const std::vector<std::string> &batch_files,
                  const CalibrateOptions &options) {
    std::vector<std::string> files = batch_files;
    if (options.max_batches > 0 && files.size() > static_cast<size_t>(options.max_batches))
        files.resize(static_cast<size_t>(options.max_batches));
    PreparedModel prepared = prepare_for_quantization(model);
    if (prepared.ops.empty()) {
        std::string nested;
        for (const auto &n : prepared.nested_fp32) nested += (nested.empty() ? "; " : ", ") + n.substr(0, n.find(" stay"));
        throw_unsupported("the model has no quantizable op at the top level of its graph (conv1d/2d/3d or "
                          "linear with constant weights, matmul by a constant; ops inside if/loop blocks stay "
                          "fp32" + nested + "); nothing to calibrate");
    }
    for (const auto &n : prepared.nested_fp32) log::warn(n);

    QConfig config;
    config.identity = prepared.identity;
    config.source = options.source;
    config.recipe = options.recipe.source;
    std::map<std::string, std::vector<double>> factors;
    if (options.recipe.smooth_quant_alpha) {
        config.smooth_quant_alpha = options.recipe.smooth_quant_alpha;
        factors = smooth(prepared, files, options, *options.recipe.smooth_quant_alpha);
    }

    // One observer per distinct value: an op's output observed once even when the next op reads it.
    std::vector<Value *> values;
    std::map<Value *, size_t> index;
    auto observe = [&](Value *v) {
        if (v && !index.count(v)) {
            index[v] = values.size();
            values.push_back(v);
        }
    };
    for (const auto &op : prepared.ops) {
        observe(op.input);
        observe(op.output());
        observe(op.add_other);
        if (op.add) observe(op.chain_output());
    }
    std::vector<std::unique_ptr<Observer>> observers;
    for (size_t i = 0; i < values.size(); ++i) observers.push_back(make_observer(options.recipe.activation_observer));
    run_batches(prepared.module, *prepared.graph, values, files, options, "input or output",
                [&](const std::vector<at::Tensor> &tensors) {
                    for (size_t i = 0; i < tensors.size(); ++i) observers[i]->observe(tensors[i]);
                });

    for (const auto &qop : prepared.ops) {
        OpConfig op;
        op.id = qop.id;
        op.module = qop.module;
        op.kind = qop.kind;
        op.input = tensor_q(*observers[index.at(qop.input)], options.recipe);
        op.output = tensor_q(*observers[index.at(qop.output())], options.recipe);
        op.weight.scales = per_channel_weight_scales(qop.weight);
        op.relu = qop.relu != nullptr;
        if (qop.add) {
            AddQ add;
            add.other = tensor_q(*observers[index.at(qop.add_other)], options.recipe);
            add.output = tensor_q(*observers[index.at(qop.chain_output())], options.recipe);
            add.relu = qop.add_relu != nullptr;
            op.add = add;
        }
        if (auto it = factors.find(op.id); it != factors.end()) op.smooth_factors = it->second;
        config.ops.push_back(std::move(op));
    }
    return config;
}

}  // namespace ipex::quant
