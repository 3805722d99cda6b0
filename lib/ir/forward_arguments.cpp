#include "ir/forward_arguments.h"

namespace ipex::ir {

std::vector<c10::IValue> forward_arguments(const torch::jit::Module &module, const std::vector<c10::IValue> &inputs) {
    const auto &args = module.get_method("forward").function().getSchema().arguments();
    if (args.size() < 2 || inputs.empty()) return inputs;  // args[0] is self
    for (size_t i = 2; i < args.size(); ++i)
        if (!args[i].default_value()) return inputs;  // (a detector's targets default to None)
    const auto list = args[1].type()->cast<c10::ListType>();
    if (!list || !list->getElementType()->cast<c10::TensorType>()) return inputs;
    c10::List<at::Tensor> tensors;
    for (const auto &v : inputs) {
        if (!v.isTensor()) return inputs;
        tensors.push_back(v.toTensor());
    }
    return {c10::IValue(std::move(tensors))};
}

}  // namespace ipex::ir
