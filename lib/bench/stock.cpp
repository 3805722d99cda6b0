#include "bench/stock.h"

#include <ATen/autocast_mode.h>

#include "base/errors.h"
#include "core/run_errors.h"
#include "model/load.h"

namespace ipex::bench {
namespace {

// Enables CPU autocast for the guard's lifetime and clears its weight-cast cache after.
class AutocastGuard {
public:
    explicit AutocastGuard(at::ScalarType dtype) : active_(dtype != at::kFloat) {
        if (!active_) return;
        prev_enabled_ = at::autocast::is_cpu_enabled();
        prev_dtype_ = at::autocast::get_autocast_cpu_dtype();
        at::autocast::set_cpu_enabled(true);
        at::autocast::set_autocast_cpu_dtype(dtype);
    }
    ~AutocastGuard() {
        if (!active_) return;
        at::autocast::set_cpu_enabled(prev_enabled_);
        at::autocast::set_autocast_cpu_dtype(prev_dtype_);
        at::autocast::clear_cache();
    }

private:
    bool active_;
    bool prev_enabled_ = false;
    at::ScalarType prev_dtype_ = at::kBFloat16;
};

at::MemoryFormat channels_last_for(int64_t dim) {
    return dim == 5 ? at::MemoryFormat::ChannelsLast3d : at::MemoryFormat::ChannelsLast;
}

}  // namespace

std::vector<c10::IValue> to_channels_last(const std::vector<c10::IValue> &inputs) {
    std::vector<c10::IValue> out;
    for (const auto &v : inputs) {
        if (v.isTensor() && (v.toTensor().dim() == 4 || v.toTensor().dim() == 5) &&
            at::isFloatingType(v.toTensor().scalar_type())) {
            out.emplace_back(v.toTensor().contiguous(channels_last_for(v.toTensor().dim())));
        } else {
            out.push_back(v);
        }
    }
    return out;
}

StockRunner::StockRunner(const std::string &original_path, const std::string &dtype,
                         const std::vector<c10::IValue> &inputs)
    : path_(original_path) {
    model::LoadedModel loaded = model::load_model(original_path);
    torch::jit::Module m = loaded.module;
    m.eval();
    const bool lowp = dtype == "bf16" || dtype == "fp16";
    if (lowp) {
        autocast_dtype_ = dtype == "bf16" ? at::kBFloat16 : at::kHalf;
        for (const auto &p : m.named_parameters(true)) {
            if (p.value.dim() == 4 || p.value.dim() == 5) {
                at::NoGradGuard no_grad;
                p.value.set_data(p.value.contiguous(channels_last_for(p.value.dim())));
            }
        }
        inputs_ = to_channels_last(inputs);
        kind_ = "stock-autocast-" + dtype + "-frozen-channels-last";
    } else {
        inputs_ = inputs;
        kind_ = "stock-fp32-frozen";
    }
    try {
        module_ = torch::jit::freeze(m);
    } catch (const c10::Error &e) {
        throw_unsupported("stock libtorch cannot freeze '" + original_path + "': " + readable_error(e));
    }
}

c10::IValue StockRunner::run_once() {
    c10::InferenceMode guard;
    AutocastGuard autocast(autocast_dtype_);
    return model::run_forward(module_, inputs_, "the stock baseline '" + path_ + "'");
}

void StockRunner::run() { run_once(); }

}  // namespace ipex::bench
