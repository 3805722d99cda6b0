#include "commands/bench.h"

#include <ATen/Parallel.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <sstream>

#include "base/errors.h"
#include "base/isa_check.h"
#include "base/log.h"
#include "base/text.h"
#include "bench/stock.h"
#include "commands/threads.h"
#include "core/system_info.h"
#include "core/tensor_spec.h"
#include "model/inspect.h"
#include "model/load.h"
#include "ops/cpu_allocator.h"

namespace ipex::commands {
namespace {

std::string fmt(double v, int precision = 3) { return fixed_text(v, precision); }

// oneDNN's default fp32 math mode while the candidate runs (primitives created then keep it;
// the baseline runs strict fp32).
class Fp32MathScope {
public:
    explicit Fp32MathScope(bool bf32) : active_(bf32) {
        if (active_) dnnl::set_default_fpmath_mode(dnnl::fpmath_mode::bf16);
    }
    ~Fp32MathScope() {
        if (active_) dnnl::set_default_fpmath_mode(dnnl::fpmath_mode::strict);
    }
    Fp32MathScope(const Fp32MathScope &) = delete;
    Fp32MathScope &operator=(const Fp32MathScope &) = delete;

private:
    bool active_;
};

std::vector<std::string> specs_from_metadata(const model::LoadedModel &m) {
    auto specs = model::recorded_sample_inputs(m);
    if (specs.empty()) throw_usage("give the model inputs with --input SPEC (e.g. --input 16x3x224x224)");
    return specs;
}

std::optional<CpuCacheReport> cpu_cache_report() {
    const ops::CachingCpuAllocator *cache = ops::installed_cpu_cache();
    if (!cache) return std::nullopt;
    const ops::CpuCacheStats c = cache->stats();
    CpuCacheReport r;
    r.limit_mb = static_cast<int64_t>(cache->limit_bytes() / 1048576);
    r.hits = c.hits;
    r.misses = c.misses;
    r.evictions = c.evictions;
    r.peak_cached_mb = c.peak_cached_bytes / 1048576.0;
    return r;
}

IsaCheck check_isa(const std::string &flag, const std::string &asked, const std::function<void()> &run_once) {
    IsaCheck check;
    check.flag = flag;
    check.asked = asked;
    check.stats = parse_verbose_text(bench::capture_onednn_verbose(run_once));
    check.share = compute_share_satisfying(check.stats, asked);
    check.ok = check.stats.has_compute() && check.share >= kIsaShareRequired;
    return check;
}

// The model, its inputs and the candidate's run: what both the timing and the profile use.
struct Candidate {
    model::LoadedModel loaded;
    std::vector<c10::IValue> inputs;
    std::string dtype, what;
    bool bf32 = false;

    void run() {
        Fp32MathScope math(bf32);
        c10::InferenceMode guard;
        model::run_forward(loaded.module, inputs, what);
    }
};

// --profile: the usual warmup and timed iterations, then as many iterations again with the op
// callbacks on; the limits the table compares with are measured first, on the run's threads.
ProfileReport run_profile(const BenchRequest &request, Candidate &candidate, int threads) {
    const bench::RunFn run = [&] { candidate.run(); };
    ProfileReport report;
    report.model = request.model;
    report.dtype = candidate.dtype;
    report.inputs = describe_inputs(candidate.inputs);
    report.threads = threads;
    report.warmup = request.timing.warmup;
    report.limits = bench::measure_machine_limits(threads);
    const bench::TimingResult r = bench::time_interleaved(run, nullptr, request.timing);
    report.timed_iterations = r.iterations;
    report.profile = bench::profile_runs(run, r.iterations, request.profile_layers);
    report.profile.unprofiled_median_ms = r.candidate.median;
    // A measurement only errs low (the host of a VM was busier): an op faster than its peak
    // means measuring again and keeping the higher figures.
    report.remeasured = report.profile.exceeds_peak(report.limits);
    if (report.remeasured)
        report.limits = bench::best_of(report.limits, bench::measure_machine_limits(threads));
    return report;
}

}  // namespace

nlohmann::json IsaCheck::to_json() const {
    nlohmann::json j = stats.to_json();
    j["asked"] = asked;
    j["share"] = share;
    j["ok"] = ok;
    return j;
}

nlohmann::json CpuCacheReport::to_json() const {
    return {{"limit_mb", limit_mb}, {"hits", hits}, {"misses", misses}, {"evictions", evictions},
            {"peak_cached_mb", peak_cached_mb}};
}

nlohmann::json BaselineReport::to_json() const {
    nlohmann::json j = {{"kind", kind}, {"model", model}};
    if (latency) j["latency_ms"] = latency->to_json();
    return j;
}

nlohmann::json BenchReport::to_json() const {
    const auto or_null = [](const auto &part) { return part ? part->to_json() : nlohmann::json(nullptr); };
    return {
        {"model", model},
        {"dtype", dtype},
        {"inputs", inputs},
        {"threads", threads},
        {"iterations", iterations},
        {"warmup", warmup},
        {"batch", batch},
        {"latency_ms", latency.to_json()},
        {"throughput_per_s", throughput_per_s},
        {"peak_rss_mb", peak_rss_mb},
        {"baseline", or_null(baseline)},
        {"ratio", ratio ? nlohmann::json(*ratio) : nlohmann::json(nullptr)},
        {"isa", or_null(isa)},
        {"fp32_math_mode", fp32_math_mode},
        {"cpu_cache", or_null(cpu_cache)},
    };
}

std::string BenchReport::text() const {
    std::ostringstream out;
    const auto &s = latency;
    out << "model:       " << model << " (" << dtype << "), inputs " << inputs << ", " << threads << " threads, "
        << iterations << " iterations after " << warmup << " warmup\n";
    out << "latency ms:  min " << fmt(s.min) << "  mean " << fmt(s.mean) << "  median " << fmt(s.median);
    for (const auto &[p, v] : s.percentiles) out << "  p" << p << " " << fmt(v);
    out << "  max " << fmt(s.max) << "\n";
    out << "throughput:  " << fmt(throughput_per_s, 1) << " samples/s (batch " << batch << ")\n";
    if (baseline && baseline->latency) {
        out << "baseline:    " << baseline->kind << " (" << baseline->model << "): median "
            << fmt(baseline->latency->median) << " ms\n";
        out << "ratio:       " << fmt(ratio.value_or(0), 2) << "x (baseline median / candidate median)\n";
    }
    out << "peak RSS:    " << fmt(peak_rss_mb, 1) << " MiB\n";
    if (cpu_cache) {
        const int64_t asked = cpu_cache->hits + cpu_cache->misses;
        out << "cpu cache:   " << (asked ? fmt(100.0 * cpu_cache->hits / asked, 1) : std::string("0")) << "% of "
            << asked << " large blocks reused, at most " << fmt(cpu_cache->peak_cached_mb, 1) << " of "
            << cpu_cache->limit_mb << " MiB held (IPEX_CPU_CACHE_MB)\n";
    }
    if (isa) {
        const std::vector<std::string> isas = isa->stats.compute_isas();
        out << "isa:         convolution/matmul ran on";
        for (const auto &name : isas) out << " " << name;
        if (isas.empty()) out << " nothing through oneDNN";
        out << "; AMX " << (isa->stats.used_amx() ? "yes" : "no") << "; asked " << isa->flag << ": "
            << (isa->ok ? "yes" : "NO") << " (" << fmt(isa->share * 100, 0) << "% of their time)\n";
    }
    return out.str();
}

void BenchReport::check() const {
    if (isa && !isa->ok)
        throw_check_failed("--check-isa " + isa->flag + ": convolution/matmul did not run on " + isa->flag +
                           " (this CPU's oneDNN dispatches " + onednn_effective_isa() + ")");
}

nlohmann::json ProfileReport::to_json() const {
    nlohmann::json j = {
        {"model", model},     {"dtype", dtype},   {"inputs", inputs},
        {"threads", threads}, {"warmup", warmup}, {"limits", limits.to_json()},
    };
    j["limits"]["remeasured"] = remeasured;
    j.update(profile.to_json(limits));
    return j;
}

std::string ProfileReport::text() const {
    std::ostringstream out;
    out << "model:       " << model << " (" << dtype << "), inputs " << inputs << ", " << threads << " threads, "
        << profile.iterations << " profiled iterations after " << warmup << " warmup and " << timed_iterations
        << " timed\n";
    out << "limits:      measured on " << limits.threads << " threads"
        << (remeasured ? " (twice, the higher figures)" : "")
        << ": bf16 dot " << bench::peak_text(limits.bf16_dot_gflops, "GFLOP/s")
        << ", fp32 FMA " << bench::peak_text(limits.fp32_fma_gflops, "GFLOP/s")
        << ", int8 VNNI " << bench::peak_text(limits.int8_vnni_gops, "GOP/s")
        << ", read " << fmt(limits.read_gbs, 1) << " GB/s\n";
    out << "forward:     " << fmt(profile.forward_ms / profile.iterations) << " ms profiled (median "
        << fmt(profile.unprofiled_median_ms) << " ms without the op callbacks)\n\n";
    out << profile.table(limits);
    return out.str();
}

std::variant<BenchReport, ProfileReport> run_bench(const BenchRequest &request) {
    const int threads = thread_count(request.threads);
    const std::string isa_asked = request.check_isa.empty() ? "" : canonical_isa(request.check_isa, "--check-isa");
    at::set_num_threads(threads);

    Candidate candidate;
    candidate.loaded = model::load_model(request.model);
    candidate.loaded.module.eval();
    const std::vector<std::string> specs =
        request.inputs.empty() ? specs_from_metadata(candidate.loaded) : request.inputs;
    candidate.inputs = make_inputs(specs, request.seed);
    request.json.check({request.model});
    candidate.dtype = model::compute_dtype(candidate.loaded);
    candidate.what = "'" + request.model + "'";
    candidate.bf32 = request.fp32_math_mode == "bf32";
    if (candidate.bf32 && onednn_effective_isa().find("amx") == std::string::npos)
        log::warn("--fp32-math-mode bf32: oneDNN keeps fp32 math without AMX (this CPU: " + onednn_effective_isa() +
                  "); models optimized with --fp32-math-mode bf32 round to bf16 in their own ops regardless");
    const bench::RunFn run_candidate = [&] { candidate.run(); };
    run_candidate();  // surfaces input errors before any timing
    if (request.profile || request.profile_layers) return run_profile(request, candidate, threads);

    const std::vector<c10::IValue> &inputs = candidate.inputs;
    std::unique_ptr<bench::StockRunner> stock;
    std::optional<model::LoadedModel> base_file;
    bench::RunFn baseline_fn;
    BenchReport report;
    if (request.baseline == "stock") {
        std::string original = request.original;
        const auto &metadata = candidate.loaded.metadata;
        if (original.empty() && metadata && metadata->contains("source"))
            original = (*metadata)["source"].get<std::string>();
        if (original.empty())
            throw_usage("--baseline stock needs the original model: '" + request.model +
                        "' was not written by ipex-tool optimize; give --original FILE");
        stock = std::make_unique<bench::StockRunner>(original, candidate.dtype, inputs);
        stock->run();
        baseline_fn = [&] { stock->run(); };
        report.baseline = BaselineReport{stock->kind(), original, std::nullopt};
    } else if (!request.baseline.empty()) {
        base_file = model::load_model(request.baseline);
        base_file->module.eval();
        const std::string base_what = "'" + request.baseline + "'";
        baseline_fn = [&, base_what] {
            c10::InferenceMode guard;
            model::run_forward(base_file->module, inputs, base_what);
        };
        baseline_fn();
        report.baseline = BaselineReport{"file", request.baseline, std::nullopt};
    }
    if (!isa_asked.empty()) report.isa = check_isa(request.check_isa, isa_asked, run_candidate);

    const bench::TimingResult r =
        bench::time_interleaved(run_candidate, baseline_fn ? &baseline_fn : nullptr, request.timing);
    if (inputs.size() > 0 && inputs[0].isTensor() && inputs[0].toTensor().dim() > 0)
        report.batch = inputs[0].toTensor().size(0);
    report.model = request.model;
    report.dtype = candidate.dtype;
    report.inputs = describe_inputs(inputs);
    report.fp32_math_mode = request.fp32_math_mode;
    report.threads = threads;
    report.iterations = r.iterations;
    report.warmup = request.timing.warmup;
    report.latency = r.candidate;
    report.throughput_per_s = r.candidate.median > 0 ? report.batch * 1000.0 / r.candidate.median : 0.0;
    report.peak_rss_mb = bench::peak_rss_mb();
    if (report.baseline) report.baseline->latency = r.baseline;
    report.ratio = r.ratio();
    report.cpu_cache = cpu_cache_report();
    return report;
}

}  // namespace ipex::commands
