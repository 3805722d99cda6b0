// The "stock" baseline: what a user gets from libtorch alone for the same model.
//   fp32:      the input model, eval, torch::jit::freeze (libtorch's own frozen-graph
//              optimizations), run as is.
//   bf16/fp16: the same, with 4-D/5-D weights and inputs in channels-last and the run
//              under CPU autocast to that dtype (what torch.cpu.amp.autocast does).
#pragma once

#include <torch/script.h>

#include <memory>
#include <string>
#include <vector>

namespace ipex::bench {

class StockRunner {
public:
    // `dtype` is the candidate's compute dtype ("fp32", "bf16", "fp16").
    StockRunner(const std::string &original_path, const std::string &dtype,
                const std::vector<c10::IValue> &inputs);

    void run();
    c10::IValue run_once();  // for checks: returns the output
    const std::string &kind() const { return kind_; }
    const std::string &path() const { return path_; }

private:
    torch::jit::Module module_;
    std::vector<c10::IValue> inputs_;
    std::string path_;
    std::string kind_;  // "stock-fp32-frozen" or "stock-autocast-bf16-frozen-channels-last"
    at::ScalarType autocast_dtype_ = at::kFloat;
};

// Inputs converted to channels-last where they are 4-D/5-D floating tensors.
std::vector<c10::IValue> to_channels_last(const std::vector<c10::IValue> &inputs);

}  // namespace ipex::bench
