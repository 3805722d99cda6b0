#include "options.h"

#include "core/system_info.h"
#include "llm/limits.h"

namespace ipex::app {

CLI::Option *add_threads_option(CLI::App &sub, std::optional<int> &threads, const std::string &what) {
    return sub.add_option("--threads", threads,
                          what + ", 1 to " + std::to_string(kMaxThreads) +
                              " (default: OMP_NUM_THREADS, else the physical cores this process may run on)");
}

CLI::Option *add_json_option(CLI::App &sub, commands::JsonOutput &output, JsonForm form, const std::string &help,
                             const std::string &name) {
    switch (form) {
    case JsonForm::flag:
        return sub.add_flag_callback(name, [&output] { output.target = "-"; }, help);
    case JsonForm::flag_or_file:
        return sub
            .add_option_function<std::string>(
                name, [&output](const std::string &target) { output.target = target.empty() ? "-" : target; }, help)
            ->expected(0, 1);
    case JsonForm::file:
        break;
    }
    return sub.add_option(name, output.target, help);
}

void add_woq_options(CLI::App &sub, commands::WoqRequest &woq, const WoqOptionStyle &style) {
    const std::string &p = style.prefix;
    const std::string group_default = style.group_size_default == commands::kGroupAuto
                                          ? "128 where it divides a layer's input channels, else one per output channel"
                                          : std::to_string(style.group_size_default);
    CLI::Option *options[] = {
        sub.add_option("--woq-dtype", woq.dtype, p + "quantize the linear weights round-to-nearest, weight-only: "
                                                     "int4 or int8")
            ->check(CLI::IsMember({"int4", "int8"})),
        sub.add_option("--group-size", woq.group_size,
                       p + "input channels per --woq-dtype scale/zero group, -1 for one per output channel (default: " +
                           group_default + ")"),
        sub.add_option("--lowp-mode", woq.lowp_mode,
                       p + "activations of weight-only layers: fp32, bf16 (AVX512-BF16/AMX dot products), int8 "
                           "(quantized per row, in LLM int4 prefill per row and 128 channels; VNNI, or VPMADDUBSW on "
                           "AVX2), or auto: " +
                           commands::lowp_auto_text(style.lowp_auto) +
                           " (default auto)")
            ->check(CLI::IsMember({"auto", "fp32", "bf16", "int8"})),
    };
    if (style.needs)
        for (CLI::Option *o : options) o->needs(style.needs);
}

void add_llm_load_options(CLI::App &sub, commands::LlmLoadRequest &load, const std::string &prefix,
                          CLI::Option *needs) {
    auto *dtype = sub.add_option("--dtype", load.dtype, prefix + "dense weights and activations")
                      ->check(CLI::IsMember({"bf16", "fp32"}))
                      ->capture_default_str();
    if (needs) dtype->needs(needs);
    auto *qconfig = sub.add_option("--qconfig", load.qconfig,
                                   prefix + "SmoothQuant W8A8 qconfig from 'ipex-tool calibrate-llm', or IPEX's qconfig "
                                            "summary (qconfig_summary_file): the decoder's "
                                            "projections run int8 activations x int8 weights (default: none)");
    if (needs) qconfig->needs(needs);
    auto *no_mmap = sub.add_flag("--no-mmap", load.no_mmap,
                                 prefix + "copy dense weights out of the checkpoint into memory of their own (huge "
                                          "pages) instead of reading them in place from the mapped file: a slower "
                                          "load and a private copy per process, decode steps up to ~15% faster");
    if (needs) no_mmap->needs(needs);
    add_woq_options(sub, load.woq, {commands::kGroupAuto, commands::LowpAuto::bf16_model_best_dot, prefix, needs});
}

CLI::Option *add_allow_long_context(CLI::App &sub, bool &flag, const std::string &prefix) {
    return sub.add_flag("--allow-long-context", flag,
                        prefix + "let the positions a run needs go past what the model declares (config.json's "
                                 "max_position_embeddings, times a linear rope_scaling factor) up to " +
                            std::to_string(llm::kMaxPositions) + "; its output there may not be meaningful");
}

}  // namespace ipex::app
