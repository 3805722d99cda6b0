#include "commands/bench_streams.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <sstream>

#include "base/errors.h"
#include "base/text.h"
#include "core/tensor_spec.h"
#include "model/inspect.h"
#include "model/load.h"
#include "runtime/stream.h"

namespace ipex::commands {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Releases every stream's timed loop at once, once all have warmed up.
class StartGate {
public:
    explicit StartGate(size_t parties) : waiting_(parties) {}
    void arrive_and_wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        if (--waiting_ == 0) {
            start_ = Clock::now();
            open_.notify_all();
        }
        open_.wait(lock, [this] { return waiting_ == 0; });
    }
    Clock::time_point start() const { return start_; }

private:
    std::mutex mutex_;
    std::condition_variable open_;
    size_t waiting_;
    Clock::time_point start_;
};

struct StreamRun {
    std::vector<double> ms;  // per timed request
    Clock::time_point end;
    std::string cpus;        // what the stream's thread ran on, read from inside it at the end
    int threads = 0;
};

std::vector<c10::IValue> copies(const std::vector<c10::IValue> &inputs) {
    std::vector<c10::IValue> out;
    for (const auto &v : inputs) out.push_back(v.isTensor() ? c10::IValue(v.toTensor().clone()) : v);
    return out;
}

}  // namespace

nlohmann::json StreamsBenchReport::to_json() const {
    int64_t total = 0;
    for (int64_t n : requests) total += n;
    return {{"model", model},
            {"dtype", dtype},
            {"inputs", inputs},
            {"mode", "throughput"},
            {"streams", streams},
            {"stream_cpus", stream_cpus},
            {"batch", batch},
            {"warmup", warmup},
            {"requests", requests},
            {"stream_threads", stream_threads_json()},
            {"samples", total * batch},
            {"wall_s", wall_s},
            {"throughput_per_s", throughput_per_s},
            {"latency_ms", latency.to_json()},
            {"peak_rss_mb", peak_rss_mb}};
}

nlohmann::json StreamsBenchReport::stream_threads_json() const {
    nlohmann::json out = nlohmann::json::array();
    for (const auto &s : seen) out.push_back({{"cpus", s.cpus}, {"omp_threads", s.threads}});
    return out;
}

std::string StreamsBenchReport::text() const {
    std::ostringstream out;
    int64_t total = 0;
    for (int64_t n : requests) total += n;
    out << "model:       " << model << " (" << dtype << "), inputs " << inputs << ", " << streams
        << " streams (CPUs";
    for (const auto &c : stream_cpus) out << " " << c;
    out << "), " << total << " requests after " << warmup << " warmup each\n";
    out << "latency ms:  min " << fixed_text(latency.min, 3) << "  mean " << fixed_text(latency.mean, 3) << "  median "
        << fixed_text(latency.median, 3);
    for (const auto &[p, v] : latency.percentiles) out << "  p" << p << " " << fixed_text(v, 3);
    out << "  max " << fixed_text(latency.max, 3) << " (per request)\n";
    out << "throughput:  " << fixed_text(throughput_per_s, 1) << " samples/s (batch " << batch << ", all streams, "
        << fixed_text(wall_s, 3) << " s)\n";
    out << "peak RSS:    " << fixed_text(peak_rss_mb, 1) << " MiB\n";
    return out.str();
}

StreamsBenchReport run_bench_streams(const BenchRequest &request, int64_t streams) {
    if (streams < 1 || streams > kMaxStreams)
        throw_usage("--streams " + std::to_string(streams) + " is outside 1.." + std::to_string(kMaxStreams));
    const std::vector<runtime::CpuPool> pools = runtime::split_pool(runtime::process_pool(), streams);

    model::LoadedModel loaded = model::load_model(request.model);
    loaded.module.eval();
    std::vector<std::string> specs = request.inputs;
    if (specs.empty()) specs = model::recorded_sample_inputs(loaded);
    if (specs.empty()) throw_usage("give the model inputs with --input SPEC (e.g. --input 16x3x224x224)");
    const std::vector<c10::IValue> inputs = make_inputs(specs, request.seed);
    request.json.check({request.model});
    const std::string what = "'" + request.model + "'";

    std::vector<std::unique_ptr<runtime::Stream>> workers;
    for (const auto &pool : pools) workers.push_back(std::make_unique<runtime::Stream>(pool));
    // One request on the first stream surfaces input errors before any timing.
    workers[0]->submit([&] {
        c10::InferenceMode guard;
        model::run_forward(loaded.module, copies(inputs), what);
    }).get();

    const bench::TimingOptions &timing = request.timing;
    StartGate gate(workers.size());
    std::vector<std::future<StreamRun>> runs;
    for (auto &w : workers)
        runs.push_back(w->submit([&] {
            c10::InferenceMode guard;
            const std::vector<c10::IValue> mine = copies(inputs);
            for (int i = 0; i < timing.warmup; ++i) model::run_forward(loaded.module, mine, what);
            gate.arrive_and_wait();
            StreamRun run;
            const double budget_ms = timing.duration_s ? *timing.duration_s * 1000.0 : 0.0;
            for (int i = 0; i < bench::kMaxTimedIterations; ++i) {
                if (timing.duration_s ? ms_since(gate.start()) >= budget_ms && i > 0 : i >= timing.iterations) break;
                const auto t0 = Clock::now();
                model::run_forward(loaded.module, mine, what);
                run.ms.push_back(ms_since(t0));
            }
            run.end = Clock::now();
            run.cpus = runtime::cpu_list_text(runtime::thread_cpus());
            run.threads = at::get_num_threads();
            return run;
        }));

    StreamsBenchReport report;
    std::vector<double> all;
    Clock::time_point last = Clock::time_point::min();
    for (auto &f : runs) {
        StreamRun run = f.get();
        report.requests.push_back(static_cast<int64_t>(run.ms.size()));
        report.seen.push_back({run.cpus, run.threads});
        all.insert(all.end(), run.ms.begin(), run.ms.end());
        last = std::max(last, run.end);
    }
    if (!inputs.empty() && inputs[0].isTensor() && inputs[0].toTensor().dim() > 0)
        report.batch = inputs[0].toTensor().size(0);
    report.model = request.model;
    report.dtype = model::compute_dtype(loaded);
    report.inputs = describe_inputs(inputs);
    report.streams = streams;
    for (const auto &pool : pools) report.stream_cpus.push_back(pool.text());
    report.warmup = timing.warmup;
    report.wall_s = std::chrono::duration<double>(last - gate.start()).count();
    report.latency = bench::summarize(all, timing.percentiles);
    report.throughput_per_s =
        report.wall_s > 0 ? static_cast<double>(all.size()) * static_cast<double>(report.batch) / report.wall_s : 0.0;
    report.peak_rss_mb = bench::peak_rss_mb();
    return report;
}

}  // namespace ipex::commands
