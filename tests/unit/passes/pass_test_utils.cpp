#include "pass_test_utils.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/freeze_module.h>
#include <torch/csrc/jit/passes/inliner.h>

#include "ir/graph_utils.h"

namespace ipex::passes::testing {
namespace {

std::string int_list(int64_t value, int64_t rank) {
    std::string out = "[";
    for (int64_t i = 0; i < rank; ++i) out += (i ? ", " : "") + std::to_string(value);
    return out + "]";
}

}  // namespace

torch::jit::Module make_module(const std::string &type_name, const std::string &source, const Params &params,
                               const Children &children) {
    torch::jit::Module module(type_name);
    module.register_attribute("training", c10::BoolType::get(), true);
    for (const auto &[name, tensor] : params) module.register_parameter(name, tensor, false);
    for (const auto &[name, child] : children) module.register_module(name, child);
    module.define(source);
    return module;
}

torch::jit::Module conv_module(const ConvSpec &spec) {
    const bool transposed = spec.op.rfind("conv_transpose", 0) == 0;
    const int64_t rank = spec.op[spec.op.size() - 2] - '0';  // "...2d" -> 2
    std::vector<int64_t> shape = transposed ? std::vector<int64_t>{spec.in, spec.out / spec.groups}
                                            : std::vector<int64_t>{spec.out, spec.in / spec.groups};
    for (int64_t i = 0; i < rank; ++i) shape.push_back(spec.kernel);
    Params params = {{"weight", at::randn(shape) * 0.3}};
    if (spec.bias) params.push_back({"bias", at::randn({spec.out})});
    const std::string bias = spec.bias ? "self.bias" : "None";
    const std::string stride = int_list(spec.stride, rank);
    const std::string padding = int_list(spec.padding, rank);
    const std::string ones = int_list(1, rank);
    const std::string zeros = int_list(0, rank);
    const std::string groups = std::to_string(spec.groups);
    std::string call;
    if (transposed) {
        call = "torch." + spec.op + "(x, self.weight, " + bias + ", " + stride + ", " + padding + ", " + zeros +
               ", " + groups + ", " + ones + ")";
    } else {
        call = "torch." + spec.op + "(x, self.weight, " + bias + ", " + stride + ", " + padding + ", " + ones +
               ", " + groups + ")";
    }
    return make_module("Conv", "def forward(self, x):\n    return " + call + "\n", params);
}

torch::jit::Module batch_norm_module(int64_t channels, bool affine) {
    torch::jit::Module bn("BatchNorm");
    bn.register_attribute("training", c10::BoolType::get(), true);
    if (affine) {
        bn.register_parameter("weight", at::rand({channels}) + 0.5, false);
        bn.register_parameter("bias", at::randn({channels}), false);
    }
    bn.register_buffer("running_mean", at::randn({channels}) * 0.5);
    bn.register_buffer("running_var", at::rand({channels}) + 0.5);
    const std::string w = affine ? "self.weight" : "None";
    const std::string b = affine ? "self.bias" : "None";
    bn.define("def forward(self, x):\n    return torch.batch_norm(x, " + w + ", " + b +
              ", self.running_mean, self.running_var, self.training, 0.1, 1e-5, False)\n");
    return bn;
}

torch::jit::Module linear_module(int64_t in, int64_t out, bool bias) {
    Params params = {{"weight", at::randn({out, in}) * 0.3}};
    if (bias) params.push_back({"bias", at::randn({out})});
    const std::string b = bias ? "self.bias" : "None";
    return make_module("Linear", "def forward(self, x):\n    return torch.linear(x, self.weight, " + b + ")\n",
                       params);
}

Frozen freeze(torch::jit::Module module) {
    module.eval();
    Frozen frozen;
    frozen.module = torch::jit::freeze_module(module);
    frozen.graph = frozen.module.get_method("forward").graph();
    torch::jit::Inline(*frozen.graph);
    return frozen;
}

c10::IValue run_graph(const std::shared_ptr<torch::jit::Graph> &graph, const torch::jit::Module &self,
                      std::vector<c10::IValue> inputs) {
    graph->lint();
    torch::jit::GraphFunction function("run_graph", graph->copy(), nullptr, torch::jit::ExecutorExecutionMode::SIMPLE);
    inputs.insert(inputs.begin(), self._ivalue());
    return function(std::move(inputs));
}

std::vector<at::Tensor> flatten_tensors(const c10::IValue &value) {
    std::vector<at::Tensor> out;
    if (value.isTensor()) {
        out.push_back(value.toTensor());
    } else if (value.isTuple()) {
        for (const auto &e : value.toTupleRef().elements()) {
            auto inner = flatten_tensors(e);
            out.insert(out.end(), inner.begin(), inner.end());
        }
    } else if (value.isList()) {
        for (const auto &e : value.toListRef()) {
            auto inner = flatten_tensors(e);
            out.insert(out.end(), inner.begin(), inner.end());
        }
    } else if (value.isGenericDict()) {
        for (const auto &e : value.toGenericDict()) {
            auto inner = flatten_tensors(e.value());
            out.insert(out.end(), inner.begin(), inner.end());
        }
    }
    return out;
}

namespace {

at::Tensor concat_flat(const c10::IValue &value) {
    std::vector<at::Tensor> parts;
    for (const auto &t : flatten_tensors(value)) parts.push_back(t.to(at::kDouble).reshape({-1}));
    return parts.empty() ? at::zeros({0}, at::kDouble) : at::cat(parts);
}

}  // namespace

double max_relative_error(const c10::IValue &got, const c10::IValue &want) {
    const at::Tensor a = concat_flat(got);
    const at::Tensor b = concat_flat(want);
    if (a.sizes() != b.sizes()) return std::numeric_limits<double>::infinity();
    const double scale = std::max(b.abs().max().item<double>(), 1e-12);
    return (a - b).abs().max().item<double>() / scale;
}

double cosine_similarity(const c10::IValue &got, const c10::IValue &want) {
    const at::Tensor a = concat_flat(got);
    const at::Tensor b = concat_flat(want);
    if (a.sizes() != b.sizes()) return -1.0;
    const double norms = a.norm().item<double>() * b.norm().item<double>();
    if (norms == 0.0) return a.equal(b) ? 1.0 : 0.0;
    return (a * b).sum().item<double>() / norms;
}

int count(const std::shared_ptr<torch::jit::Graph> &graph, const std::string &kind) {
    return count_op(*graph, kind);
}

}  // namespace ipex::passes::testing
