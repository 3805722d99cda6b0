#include "commands/weight_only.h"

#include "base/cpu_features.h"
#include "base/errors.h"

namespace ipex::commands {

int WoqRequest::bits() const { return dtype == "int4" ? 4 : dtype == "int8" ? 8 : 0; }

void WoqRequest::check() const {
    if (!group_size || *group_size == -1 || (*group_size > 0 && *group_size <= kMaxGroupSize)) return;
    throw_usage("--group-size must be a positive number of input channels up to " + std::to_string(kMaxGroupSize) +
                " or -1, got " + std::to_string(*group_size));
}

namespace {
// VDPBF16PS, or AMX-BF16 tiles the kernel lets this process use.
bool cpu_has_bf16_dot() {
    const CpuFeatures &cpu = cpu_features();
    return cpu.avx512_bf16 || (cpu.amx_bf16 && cpu.amx_permitted);
}
}  // namespace

std::string lowp_auto_text(LowpAuto rule) {
    return std::string("bf16 where --dtype is bf16 ") + (rule == LowpAuto::bf16_model_or_cpu ? "or" : "and") +
           " the CPU has BF16 instructions, else fp32";
}

std::string resolve_lowp_mode(const std::optional<std::string> &mode, const std::string &dtype, LowpAuto rule) {
    if (mode && *mode != "auto") return *mode;
    const bool bf16_model = dtype == "bf16";
    const bool bf16 = rule == LowpAuto::bf16_model_or_cpu ? bf16_model || cpu_has_bf16_dot()
                                                          : bf16_model && cpu_has_bf16_dot();
    return bf16 ? "bf16" : "fp32";
}

}  // namespace ipex::commands
