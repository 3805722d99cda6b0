#include "llm_options.h"

#include <ATen/Parallel.h>

#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/machine_limits.h"
#include "base/atomic_file.h"
#include "base/errors.h"
#include "base/log.h"
#include "core/system_info.h"
#include "llm/generate.h"

namespace ipex::app {

llm::LoadOptions LlmLoadArgs::options() const {
    llm::LoadOptions o;
    o.dtype = dtype;
    o.woq_bits = woq_dtype == "int4" ? 4 : woq_dtype == "int8" ? 8 : 0;
    o.group_size = group_size;
    o.lowp_mode = lowp_mode;
    return o;
}

namespace {
// --group-size: a positive count or -1; 0 is the internal "not given".
CLI::Validator group_size_check() {
    return CLI::Validator(
        [](std::string &value) -> std::string {
            try {
                size_t used = 0;
                const long long v = std::stoll(value, &used);
                if (used == value.size() && (v > 0 || v == -1)) return "";
            } catch (const std::exception &) {
            }
            return "must be a positive number of input channels or -1, got '" + value + "'";
        },
        "INT>0|-1");
}
}  // namespace

void add_llm_load_options(CLI::App &sub, LlmLoadArgs &a) {
    sub.add_option("--dtype", a.dtype, "dense weights and activations")
        ->check(CLI::IsMember({"bf16", "fp32"}))
        ->capture_default_str();
    sub.add_option("--woq-dtype", a.woq_dtype, "quantize the weights on load, weight-only (int4 or int8)")
        ->check(CLI::IsMember({"int4", "int8"}));
    sub.add_option("--group-size", a.group_size,
                   "input channels per --woq-dtype scale (-1: one per output channel; default 128 where it divides a "
                   "layer's input channels, else one per output channel)")
        ->check(group_size_check());
    sub.add_option("--lowp-mode", a.lowp_mode,
                   "activations of weight-only layers: auto (bf16 where the CPU has AVX512-BF16 and --dtype is bf16), fp32, bf16, int8")
        ->check(CLI::IsMember({"auto", "fp32", "bf16", "int8"}))
        ->capture_default_str();
    sub.add_option("--threads", a.threads,
                   "intra-op threads, " + llm::range_text(llm::counts::threads) +
                       " (default: OMP_NUM_THREADS, else the physical cores this process may run on)")
        ->check(CLI::PositiveNumber);  // 0 stands for "not given"; the upper bound is checked with the others
}

void check_llm_load_args(const LlmLoadArgs &args) {
    if (args.threads != 0) llm::check_count("--threads", args.threads, llm::counts::threads);
}

CLI::Option *add_allow_long_context(CLI::App &sub, bool &flag, const std::string &prefix) {
    return sub.add_flag("--allow-long-context", flag,
                        prefix + "let the positions a run needs go past what the model declares (config.json's "
                                 "max_position_embeddings, times a linear rope_scaling factor) up to " +
                            std::to_string(llm::kMaxPositions) + "; its output there may not be meaningful");
}

std::shared_ptr<const llm::Model> load_llm(const std::string &dir, const LlmLoadArgs &args) {
    at::set_num_threads(args.threads > 0 ? args.threads : default_threads());
    auto model = llm::Model::load(dir, args.options());
    log::verbose("loaded " + model->config().architecture + " (" + model->weights_description() + ")");
    return model;
}

void add_llm_bench_options(CLI::App &sub, LlmBenchArgs &a) {
    auto *llm = sub.add_flag("--llm", a.enabled, "MODEL is a Hugging Face decoder directory: time prefill and decode");
    sub.add_option("--input-tokens", a.input_tokens,
                   "--llm: prompt tokens per sequence (random ids), " + llm::range_text(llm::counts::input_tokens) +
                       "; N + M must be within the positions the model declares")
        ->capture_default_str()->needs(llm);
    sub.add_option("--output-tokens", a.output_tokens,
                   "--llm: generated tokens per sequence, " + llm::range_text(llm::counts::output_tokens))
        ->capture_default_str()->needs(llm);
    sub.add_option("--batch", a.batch, "--llm: sequences generated together, " + llm::range_text(llm::counts::batch))
        ->capture_default_str()->needs(llm);
    add_allow_long_context(sub, a.allow_long_context, "--llm: ")->needs(llm);
    sub.add_option("--bandwidth-gbs", a.bandwidth_gbs,
                   "--llm: memory read bandwidth for the weight-streaming floor next-token latency is reported against "
                   "(default: measured at start-up on the run's threads)")
        ->check(CLI::PositiveNumber)->needs(llm);
    sub.add_option("--peak-gflops", a.peak_gflops, "--llm: compute peak the prefill's share is reported against (default: measured at start-up on the "
                   "run's threads: the bf16 dot-product peak, the fp32 FMA peak with --dtype fp32)")
        ->check(CLI::PositiveNumber)->needs(llm);
    // --dtype, --woq-dtype, ... apply with --llm only.
    LlmLoadArgs &l = a.load;
    sub.add_option("--dtype", l.dtype, "--llm: bf16 or fp32")->check(CLI::IsMember({"bf16", "fp32"}))->needs(llm);
    sub.add_option("--woq-dtype", l.woq_dtype, "--llm: quantize on load (int4, int8)")
        ->check(CLI::IsMember({"int4", "int8"}))->needs(llm);
    sub.add_option("--group-size", l.group_size, "--llm: --woq-dtype group size (default 128 where it divides)")
        ->check(group_size_check())
        ->needs(llm);
    sub.add_option("--lowp-mode", l.lowp_mode, "--llm: activations of weight-only layers (auto, fp32, bf16, int8)")
        ->check(CLI::IsMember({"auto", "fp32", "bf16", "int8"}))->needs(llm);
}

namespace {

nlohmann::json stats_json(const llm::LatencyStats &s) {
    return {{"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}, {"min", s.min}};
}

std::string fmt(double v, int precision = 2) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(precision) << v;
    return s.str();
}

}  // namespace

int run_llm_bench(const std::string &dir, const LlmBenchArgs &a, int64_t iterations, const std::string &json,
                  uint64_t seed) {
    llm::LlmBenchOptions o;
    o.input_tokens = a.input_tokens;
    o.output_tokens = a.output_tokens;
    o.batch = a.batch;
    o.iterations = iterations;
    o.warmup = a.warmup;
    o.seed = seed;
    o.allow_long_context = a.allow_long_context;
    // The request against the model's config before anything is measured, allocated or loaded.
    check_llm_load_args(a.load);
    llm::check_bench_llm(llm::read_config(dir), o);
    if (!json.empty() && json != "-") check_output_path(json, {});
    // The limits the figures are compared with: measured here, with this run's threads, before the
    // weights take memory (explicit values override).
    const int threads = a.load.threads > 0 ? a.load.threads : default_threads();
    nlohmann::json limits_json = {{"measured", false}};
    double peak_gflops = a.peak_gflops, bandwidth_gbs = a.bandwidth_gbs;
    std::string peak_kind = "given";
    if (peak_gflops <= 0 || bandwidth_gbs <= 0) {
        const bench::MachineLimits m = bench::measure_machine_limits(threads);
        limits_json = m.to_json();
        limits_json["measured"] = true;
        if (peak_gflops <= 0) {
            const bool bf16_peak = a.load.dtype != "fp32" && m.bf16_dot_gflops > 0;
            peak_gflops = bf16_peak ? m.bf16_dot_gflops : m.fp32_fma_gflops;
            peak_kind = bf16_peak ? "bf16_dot" : "fp32_fma";
        }
        if (bandwidth_gbs <= 0) bandwidth_gbs = m.read_gbs;
        log::verbose("machine limits on " + std::to_string(m.threads) + " threads: " + limits_json.dump());
    }
    limits_json["peak_gflops"] = peak_gflops;
    limits_json["peak_source"] = a.peak_gflops > 0 ? "given" : "measured";
    limits_json["peak_kind"] = peak_kind;
    limits_json["bandwidth_gbs"] = bandwidth_gbs;
    limits_json["bandwidth_source"] = a.bandwidth_gbs > 0 ? "given" : "measured";
    const auto model = load_llm(dir, a.load);
    const llm::LlmBenchResult r = llm::bench_llm(model, o);
    const double floor_ms =
        bandwidth_gbs > 0 ? static_cast<double>(r.weight_bytes_per_token) / (bandwidth_gbs * 1e6) : 0;
    nlohmann::json report = {
        {"model", dir},
        {"architecture", model->config().architecture},
        {"weights", model->weights_description()},
        {"threads", at::get_num_threads()},
        {"batch", o.batch},
        {"input_tokens", o.input_tokens},
        {"output_tokens", o.output_tokens},
        {"iterations", o.iterations},
        {"first_token_ms", stats_json(r.first_token_ms)},
        {"next_token_ms", stats_json(r.next_token_ms)},
        {"tokens_per_second", r.tokens_per_second},
        {"prefill_gflops", r.prefill_gflops},
        {"weight_bytes_per_token", r.weight_bytes_per_token},
        {"kv_cache_bytes", r.kv_cache_bytes},
        {"non_finite_logits", r.non_finite_logits},
        {"peak_rss_bytes", r.peak_rss_bytes},
        {"limits", limits_json},
    };
    if (floor_ms > 0) {
        report["bandwidth_floor_ms"] = floor_ms;
        report["next_token_over_floor"] = r.next_token_ms.p50 / floor_ms;
    }
    if (peak_gflops > 0) report["prefill_share_of_peak"] = r.prefill_gflops / peak_gflops;
    if (!json.empty()) write_text_atomically(json, report.dump(2) + "\n");
    if (json != "-") {
        std::ostream &out = json.empty() ? std::cout : std::cerr;
        out << model->config().architecture << " " << model->weights_description() << ", batch " << o.batch << ", "
            << o.input_tokens << " in / " << o.output_tokens << " out, " << at::get_num_threads() << " threads, "
            << o.iterations << " iterations\n"
            << "first token: mean " << fmt(r.first_token_ms.mean) << " ms, p50 " << fmt(r.first_token_ms.p50)
            << " ms (" << fmt(r.prefill_gflops, 1) << " GFLOP/s"
            << (peak_gflops > 0 ? ", " + fmt(100 * r.prefill_gflops / peak_gflops, 1) + "% of the " +
                                      limits_json["peak_source"].get<std::string>() + " peak " + fmt(peak_gflops, 0)
                                : "")
            << ")\n"
            << "next token:  mean " << fmt(r.next_token_ms.mean) << " ms, p50 " << fmt(r.next_token_ms.p50) << ", p90 "
            << fmt(r.next_token_ms.p90) << ", p99 " << fmt(r.next_token_ms.p99) << " ms";
        if (floor_ms > 0)
            out << " (" << fmt(r.next_token_ms.p50 / floor_ms) << "x the bandwidth floor " << fmt(floor_ms) << " ms at "
                << limits_json["bandwidth_source"].get<std::string>() << " " << fmt(bandwidth_gbs, 1) << " GB/s)";
        out << "\nthroughput:  " << fmt(r.tokens_per_second, 1) << " tokens/s; weights " << fmt(r.weight_bytes_per_token / 1e6, 1)
            << " MB/token; peak RSS " << fmt(static_cast<double>(r.peak_rss_bytes) / (1 << 20), 0) << " MiB\n";
    }
    return 0;
}

}  // namespace ipex::app
