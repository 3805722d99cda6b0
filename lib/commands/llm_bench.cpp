#include "commands/llm_bench.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <sstream>

#include "base/log.h"
#include "base/text.h"
#include "commands/threads.h"
#include "llm/config.h"

namespace ipex::commands {
namespace {

nlohmann::json stats_json(const llm::LatencyStats &s) {
    return {{"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99}, {"min", s.min}};
}

const char *source(bool given) { return given ? "given" : "measured"; }

std::string flag_text(const std::string &flag) {
    if (flag == "prefill_above_measured_peak")
        return "the prefill ran faster than the measured peak, also when measured again: the peak is low on this "
               "host now (a busy neighbour); its share is not a fact";
    return "a decode step read its weights faster than the measured bandwidth, also when measured again (caches "
           "hold part of the weights, or the probe was disturbed): the floor ratio is not a fact";
}

// The limits the figures are compared with: explicit values as given, the others measured on
// the run's threads before the weights take memory.
LlmLimits llm_limits(const LlmBenchRequest &request, int threads) {
    LlmLimits limits;
    limits.peak_given = request.peak_gflops > 0;
    limits.bandwidth_given = request.bandwidth_gbs > 0;
    limits.peak_gflops = request.peak_gflops;
    limits.bandwidth_gbs = request.bandwidth_gbs;
    if (limits.peak_given && limits.bandwidth_given) return limits;
    const bench::MachineLimits m = bench::measure_machine_limits(threads);
    limits.measured = m;
    if (!limits.peak_given) {
        const bool bf16_peak = request.load.dtype != "fp32" && m.bf16_dot_gflops > 0;
        limits.peak_gflops = bf16_peak ? m.bf16_dot_gflops : m.fp32_fma_gflops;
        limits.peak_kind = bf16_peak ? "bf16_dot" : "fp32_fma";
    }
    if (!limits.bandwidth_given) limits.bandwidth_gbs = m.read_gbs;
    nlohmann::json measured = m.to_json();
    measured["measured"] = true;
    log::verbose("machine limits on " + std::to_string(m.threads) + " threads: " + measured.dump());
    return limits;
}

}  // namespace

nlohmann::json LlmLimits::to_json() const {
    nlohmann::json j = {{"measured", false}};
    if (measured) {
        j = measured->to_json();
        j["measured"] = true;
    }
    j["peak_gflops"] = peak_gflops;
    j["peak_source"] = source(peak_given);
    j["peak_kind"] = peak_kind;
    j["bandwidth_gbs"] = bandwidth_gbs;
    j["bandwidth_source"] = source(bandwidth_given);
    j["flags"] = flags;
    return j;
}

double LlmBenchReport::bandwidth_floor_ms() const {
    return limits.bandwidth_gbs > 0 ? static_cast<double>(result.weight_bytes_per_token) / (limits.bandwidth_gbs * 1e6)
                                    : 0;
}

nlohmann::json LlmBenchReport::to_json() const {
    const llm::LlmBenchResult &r = result;
    nlohmann::json j = {
        {"model", model},
        {"architecture", architecture},
        {"weights", weights},
        {"threads", threads},
        {"batch", run.batch},
        {"input_tokens", run.input_tokens},
        {"output_tokens", run.output_tokens},
        {"iterations", run.iterations},
        {"first_token_ms", stats_json(r.first_token_ms)},
        {"next_token_ms", stats_json(r.next_token_ms)},
        {"tokens_per_second", r.tokens_per_second},
        {"prefill_gflops", r.prefill_gflops},
        {"weight_bytes_per_token", r.weight_bytes_per_token},
        {"kv_cache_bytes", r.kv_cache_bytes},
        {"non_finite_logits", r.non_finite_logits},
        {"peak_rss_bytes", r.peak_rss_bytes},
        {"load_peak_rss_bytes", load_peak_rss_bytes},
        {"load_ms", load_ms},
        {"weights_mapped", weights_mapped},
        {"resident_weight_bytes", r.resident_weight_bytes},
        {"limits", limits.to_json()},
    };
    const double floor_ms = bandwidth_floor_ms();
    if (floor_ms > 0) {
        j["bandwidth_floor_ms"] = floor_ms;
        j["next_token_over_floor"] = r.next_token_ms.p50 / floor_ms;
    }
    if (r.resident_weight_bytes > 0)
        j["peak_rss_over_resident_weights"] =
            static_cast<double>(r.peak_rss_bytes) / static_cast<double>(r.resident_weight_bytes);
    if (limits.peak_gflops > 0) j["prefill_share_of_peak"] = r.prefill_gflops / limits.peak_gflops;
    return j;
}

std::string LlmBenchReport::text() const {
    const llm::LlmBenchResult &r = result;
    const auto fmt = [](double v, int precision = 2) { return fixed_text(v, precision); };
    const double peak = limits.peak_gflops, floor_ms = bandwidth_floor_ms();
    std::ostringstream out;
    out << architecture << " " << weights << ", batch " << run.batch << ", " << run.input_tokens << " in / "
        << run.output_tokens << " out, " << threads << " threads, " << run.iterations << " iterations\n"
        << "first token: mean " << fmt(r.first_token_ms.mean) << " ms, p50 " << fmt(r.first_token_ms.p50) << " ms ("
        << fmt(r.prefill_gflops, 1) << " GFLOP/s"
        << (peak > 0 ? ", " + fmt(100 * r.prefill_gflops / peak, 1) + "% of the " + source(limits.peak_given) +
                           " peak " + fmt(peak, 0)
                     : "")
        << ")\n"
        << "next token:  mean " << fmt(r.next_token_ms.mean) << " ms, p50 " << fmt(r.next_token_ms.p50) << ", p90 "
        << fmt(r.next_token_ms.p90) << ", p99 " << fmt(r.next_token_ms.p99) << " ms";
    if (floor_ms > 0)
        out << " (" << fmt(r.next_token_ms.p50 / floor_ms) << "x the bandwidth floor " << fmt(floor_ms) << " ms at "
            << source(limits.bandwidth_given) << " " << fmt(limits.bandwidth_gbs, 1) << " GB/s)";
    out << "\nthroughput:  " << fmt(r.tokens_per_second, 1) << " tokens/s; weights "
        << fmt(r.weight_bytes_per_token / 1e6, 1) << " MB/token; peak RSS "
        << fmt(static_cast<double>(r.peak_rss_bytes) / (1 << 20), 0) << " MiB";
    if (r.resident_weight_bytes > 0)
        out << ", " << fmt(static_cast<double>(r.peak_rss_bytes) / static_cast<double>(r.resident_weight_bytes))
            << "x the " << fmt(static_cast<double>(r.resident_weight_bytes) / (1 << 20), 0) << " MiB of weights held";
    out << "\n";
    if (load_ms > 0 || load_peak_rss_bytes > 0)
        out << "load:        " << fmt(load_ms / 1000) << " s, peak RSS "
            << fmt(static_cast<double>(load_peak_rss_bytes) / (1 << 20), 0) << " MiB"
            << (weights_mapped ? "" : " (--no-mmap: dense weights copied)") << "\n";
    for (const std::string &flag : limits.flags) out << "note:        " << flag_text(flag) << "\n";
    return out.str();
}

LlmBenchReport run_llm_bench(const LlmBenchRequest &request) {
    // The request against the model's config before anything is measured, allocated or loaded.
    request.load.check();
    llm::check_bench_llm(llm::read_config(request.model), request.run);
    request.json.check({});
    LlmBenchReport report;
    report.model = request.model;
    report.run = request.run;
    report.limits = llm_limits(request, thread_count(request.load.threads));
    const auto start = std::chrono::steady_clock::now();
    const auto model = load_llm(request.model, request.load);
    report.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    report.load_peak_rss_bytes = llm::peak_rss_bytes();
    report.weights_mapped = !request.load.no_mmap;
    report.result = llm::bench_llm(model, request.run);
    report.architecture = model->config().architecture;
    report.weights = model->weights_description();
    report.threads = at::get_num_threads();
    const int threads = report.threads;
    reconcile_limits(report, [threads] { return bench::measure_machine_limits(threads); });
    return report;
}

void reconcile_limits(LlmBenchReport &report, const std::function<bench::MachineLimits()> &remeasure) {
    LlmLimits &l = report.limits;
    if (!l.measured) return;
    const llm::LlmBenchResult &r = report.result;
    const bool over_peak = !l.peak_given && l.peak_gflops > 0 && r.prefill_gflops > l.peak_gflops;
    const bool over_bandwidth = !l.bandwidth_given && report.bandwidth_floor_ms() > 0 &&
                                r.next_token_ms.p50 < report.bandwidth_floor_ms();
    if (!over_peak && !over_bandwidth) return;
    const bench::MachineLimits again = remeasure();
    if (!l.peak_given) {
        const double peak = l.peak_kind == "bf16_dot" ? again.bf16_dot_gflops : again.fp32_fma_gflops;
        l.peak_gflops = std::max(l.peak_gflops, peak);
    }
    if (!l.bandwidth_given) l.bandwidth_gbs = std::max(l.bandwidth_gbs, again.read_gbs);
    if (!l.peak_given && r.prefill_gflops > l.peak_gflops) l.flags.push_back("prefill_above_measured_peak");
    if (!l.bandwidth_given && r.next_token_ms.p50 < report.bandwidth_floor_ms())
        l.flags.push_back("decode_above_measured_bandwidth");
    for (const std::string &flag : l.flags) log::warn("bench --llm: " + flag_text(flag));
}

}  // namespace ipex::commands
