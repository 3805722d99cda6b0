#include "optimize_woq.h"

#include "base/errors.h"
#include "base/log.h"
#include "checkpoint/import_checkpoint.h"

namespace ipex::app {

nlohmann::json WoqRun::to_json() const {
    nlohmann::json j = report.to_json();
    j["lowp_mode"] = options.lowp_mode;
    j["source"] = source;
    return j;
}

void add_woq_options(CLI::App &sub, WoqArgs &a) {
    sub.add_option("--low-precision-checkpoint", a.checkpoint,
                   "weight-only checkpoint written by 'ipex-tool import', or a GPTQ/AWQ checkpoint (imported "
                   "with 'import auto' settings): its Linears replace the model's by module path");
    sub.add_option("--woq-dtype", a.woq_dtype,
                   "without a checkpoint: quantize every Linear's weight round-to-nearest to int4 or int8")
        ->check(CLI::IsMember({"int4", "int8"}));
    sub.add_option("--group-size", a.group_size,
                   "with --woq-dtype: input channels per scale/zero group, -1 for one per output channel "
                   "(default -1)")
        ->check(CLI::Range(int64_t(-1), int64_t(1) << 24));
    sub.add_option("--lowp-mode", a.lowp_mode,
                   "weight-only compute: fp32, bf16 (AVX512-BF16/AMX matmul for large batches), int8 (activations "
                   "quantized per row, VNNI), auto = bf16 where the CPU has BF16 instructions, else fp32 "
                   "(default auto)")
        ->check(CLI::IsMember({"auto", "fp32", "bf16", "int8"}));
    sub.add_flag("--allow-partial", a.allow_partial,
                 "replace the Linears the checkpoint matches; list missing, mismatched and unused layers in the "
                 "report instead of failing");
}

std::shared_ptr<WoqRun> woq_pass_options(const WoqArgs &a, const std::string &dtype, bool portable,
                                     passes::OptimizeOptions &options, const torch::jit::Module &model) {
    if (a.checkpoint.empty() && a.woq_dtype.empty()) {
        if (!a.lowp_mode.empty()) throw_usage("--lowp-mode needs --low-precision-checkpoint or --woq-dtype");
        if (a.group_size != 0) throw_usage("--group-size needs --woq-dtype");
        if (a.allow_partial) throw_usage("--allow-partial needs --low-precision-checkpoint");
        return nullptr;
    }
    if (!a.checkpoint.empty() && !a.woq_dtype.empty())
        throw_usage("--woq-dtype quantizes without a checkpoint; give either it or --low-precision-checkpoint");
    if (!a.checkpoint.empty() && a.group_size != 0)
        throw_usage("--group-size applies to --woq-dtype; the checkpoint carries its own group size");
    if (a.allow_partial && a.checkpoint.empty()) throw_usage("--allow-partial needs --low-precision-checkpoint");
    if (portable)
        throw_usage("weight-only linears need libipex_ops.so, so the model cannot be --portable; drop one of them");

    auto run = std::make_shared<WoqRun>();
    std::string mode = a.lowp_mode.empty() ? "auto" : a.lowp_mode;
    if (mode == "auto" && dtype == "bf16") mode = "bf16";
    run->options.lowp_mode = woq::resolve_lowp_mode(mode);
    run->options.allow_partial = a.allow_partial;
    run->options.module = &model;
    if (!a.checkpoint.empty()) {
        woq::ImportResult imported = woq::load_low_precision_checkpoint(a.checkpoint);
        run->checkpoint = std::move(imported.checkpoint);
        run->source = imported.summary;
        run->options.checkpoint = &run->checkpoint;
    } else {
        run->options.rtn_bits = a.woq_dtype == "int4" ? 4 : 8;
        run->options.rtn_group_size = a.group_size == 0 ? -1 : a.group_size;
        if (run->options.rtn_group_size == 0 || run->options.rtn_group_size < -1)
            throw_usage("--group-size must be -1 or positive");
        run->source = {{"method", "rtn"}, {"dtype", a.woq_dtype}, {"group_size", run->options.rtn_group_size}};
    }
    options.woq = run->options;
    return run;
}

}  // namespace ipex::app
