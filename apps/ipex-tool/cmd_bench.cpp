// ipex-tool bench MODEL, and bench MODEL_DIR --llm: see commands/bench.h, commands/llm_bench.h.
#include "commands.h"
#include "commands/bench.h"
#include "commands/bench_streams.h"
#include "commands/llm_bench.h"
#include "llm/limits.h"
#include "options.h"

namespace ipex::app {
namespace {

// Options of `bench MODEL_DIR --llm` (--threads, --seed, --iterations and --json are bench's).
CLI::Option *add_llm_bench_options(CLI::App &sub, commands::LlmBenchRequest &r, bool &enabled) {
    auto *llm = sub.add_flag("--llm", enabled, "MODEL is a Hugging Face decoder directory: time prefill and decode");
    sub.add_option("--input-tokens", r.run.input_tokens,
                   "--llm: prompt tokens per sequence (random ids), " + llm::range_text(llm::counts::input_tokens) +
                       "; N + M must be within the positions the model declares")
        ->capture_default_str()->needs(llm);
    sub.add_option("--output-tokens", r.run.output_tokens,
                   "--llm: generated tokens per sequence, " + llm::range_text(llm::counts::output_tokens))
        ->capture_default_str()->needs(llm);
    sub.add_option("--batch", r.run.batch, "--llm: sequences generated together, " + llm::range_text(llm::counts::batch))
        ->capture_default_str()->needs(llm);
    add_allow_long_context(sub, r.run.allow_long_context, "--llm: ")->needs(llm);
    sub.add_option("--bandwidth-gbs", r.bandwidth_gbs,
                   "--llm: memory read bandwidth for the weight-streaming floor next-token latency is reported against "
                   "(default: measured at start-up on the run's threads)")
        ->check(CLI::PositiveNumber)->needs(llm);
    sub.add_option("--peak-gflops", r.peak_gflops, "--llm: compute peak the prefill's share is reported against (default: measured at start-up on the "
                   "run's threads: the bf16 dot-product peak, the fp32 FMA peak with --dtype fp32)")
        ->check(CLI::PositiveNumber)->needs(llm);
    add_llm_load_options(sub, r.load, "--llm: ", llm);
    return llm;
}

}  // namespace

Runner setup_bench(CLI::App &sub) {
    auto b = std::make_shared<commands::BenchRequest>();
    auto l = std::make_shared<commands::LlmBenchRequest>();
    auto llm = std::make_shared<bool>(false);
    auto streams = std::make_shared<int64_t>(0);
    sub.add_option("MODEL", b->model, "TorchScript model to time (with --llm: a Hugging Face model directory)")->required();
    sub.add_option("--input", b->inputs, "input SPEC (repeatable); default: the model's --sample-input")
        ->allow_extra_args(false);
    sub.add_option("--seed", b->seed, "seed for random inputs")->capture_default_str();
    auto *iters = sub.add_option("--iterations", b->timing.iterations, "timed iterations, 1 to 10000000")
                      ->check(CLI::Range(1, bench::kMaxTimedIterations))
                      ->capture_default_str();
    sub.add_option("--duration", b->timing.duration_s,
                   "time for S seconds instead of a fixed count (up to 86400; stops at 10000000 iterations)")
        ->check(CLI::Range(1e-3, bench::kMaxTimedSeconds))
        ->excludes(iters);
    sub.add_option("--warmup", b->timing.warmup, "untimed iterations first, 0 to 10000000")
        ->check(CLI::Range(0, bench::kMaxTimedIterations))
        ->capture_default_str();
    add_threads_option(sub, b->threads);
    auto *baseline = sub.add_option("--baseline", b->baseline,
                   "time a baseline interleaved with MODEL: 'stock' (the original in stock libtorch) or FILE");
    sub.add_option("--original", b->original, "original model for --baseline stock (default: from MODEL's record)");
    sub.add_option("--percentiles", b->timing.percentiles, "latency percentiles to report")
        ->delimiter(',')
        ->check(CLI::Range(0.0, 100.0));
    add_json_option(sub, b->json, JsonForm::flag_or_file, "write the results as JSON to FILE, or - (alone: stdout)");
    sub.add_option("--fp32-math-mode", b->fp32_math_mode,
                   "bf32 lets oneDNN compute the candidate's fp32 conv/matmul in bf16 (AMX); the baseline stays fp32")
        ->check(CLI::IsMember({"fp32", "bf32"}))
        ->capture_default_str();
    auto *isa = sub.add_option("--check-isa", b->check_isa,
                   "run once under oneDNN verbose; exit 1 unless 90% of conv/matmul time ran on ISA or a superset (amx, avx512_core_bf16, ...)");
    auto *llm_flag = add_llm_bench_options(sub, *l, *llm);
    auto *streams_opt =
        sub.add_option("--streams", *streams,
                       "throughput mode: N streams (1 to the process's CPUs), each a thread pinned to its share of the "
                       "CPUs with an OpenMP team of its size, running MODEL on the whole input back to back; reports "
                       "samples/s of all streams and per-request latency (--iterations per stream)")
            ->check(CLI::Range(int64_t(1), commands::kMaxStreams))
            ->excludes(baseline)
            ->excludes(isa)
            ->excludes(llm_flag)
            ->excludes("--threads");
    sub.add_flag("--profile", b->profile,
                 "after the timed iterations, profile as many again op by op: time, share, FLOPs, GFLOP/s and % of "
                 "the peak measured at start-up for conv/linear/matmul/attention/rnn ops, time of every other op")
        ->excludes(baseline)
        ->excludes(isa)
        ->excludes(llm_flag)
        ->excludes(streams_opt);
    sub.add_flag("--profile-layers", b->profile_layers,
                 "--profile with a row per layer: ops of one name and dtype split by their input sizes (channels-last "
                 "marked [cl]) and, for convolutions and linears, weight sizes, stride, padding, dilation and groups")
        ->excludes(baseline)
        ->excludes(isa)
        ->excludes(llm_flag)
        ->excludes(streams_opt);
    return [b, l, llm, iters, streams] {
        if (*streams > 0) {
            commands::emit(b->json, commands::run_bench_streams(*b, *streams));
            return 0;
        }
        if (!*llm) {
            std::visit([&](const auto &report) {
                commands::emit(b->json, report);
                report.check();
            }, commands::run_bench(*b));
            return 0;
        }
        l->model = b->model;
        l->load.threads = b->threads;
        l->run.seed = b->seed;
        if (iters->count() > 0) l->run.iterations = b->timing.iterations;
        l->json = b->json;
        commands::emit(l->json, commands::run_llm_bench(*l));
        return 0;
    };
}

}  // namespace ipex::app
