// The reports of the command drivers (lib/commands): the JSON keys and the text lines the
// commands print, from hand-made results.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "base/text.h"
#include "commands/bench.h"
#include "commands/generate.h"
#include "commands/llm_bench.h"
#include "commands/optimize.h"
#include "commands/perplexity.h"
#include "commands/quantize.h"
#include "unit/test_errors.h"

namespace ipex::commands {
namespace {

using testing::code_of;

bool has(const std::string &text, const std::string &part) { return text.find(part) != std::string::npos; }

bench::LatencyStats latency(double median) {
    bench::LatencyStats s;
    s.min = median / 2;
    s.mean = s.median = median;
    s.max = median * 2;
    s.percentiles = {{50, median}, {99, median * 2}};
    s.samples = 10;
    return s;
}

TEST(Text, FixedDigitsAfterThePoint) {
    EXPECT_EQ(fixed_text(2.5, 3), "2.500");
    EXPECT_EQ(fixed_text(1234.56, 1), "1234.6");
    EXPECT_EQ(fixed_text(99.5, 0), "100");
}

TEST(BenchReport, JsonAndText) {
    BenchReport r;
    r.model = "m.pt";
    r.dtype = "bf16";
    r.inputs = "2x3x8x8:fp32";
    r.fp32_math_mode = "fp32";
    r.threads = 2;
    r.iterations = 10;
    r.warmup = 3;
    r.batch = 2;
    r.latency = latency(4);
    r.throughput_per_s = 500;
    r.peak_rss_mb = 100.25;
    nlohmann::json j = r.to_json();
    for (const char *null_key : {"baseline", "ratio", "isa", "cpu_cache"}) EXPECT_TRUE(j[null_key].is_null()) << null_key;
    EXPECT_EQ(j["latency_ms"]["p99"], 8.0);
    EXPECT_EQ(j["batch"], 2);
    std::string text = r.text();
    EXPECT_TRUE(has(text, "model:       m.pt (bf16), inputs 2x3x8x8:fp32, 2 threads, 10 iterations after 3 warmup\n"));
    EXPECT_TRUE(has(text, "latency ms:  min 2.000  mean 4.000  median 4.000  p50 4.000  p99 8.000  max 8.000\n"));
    EXPECT_TRUE(has(text, "throughput:  500.0 samples/s (batch 2)\n"));
    EXPECT_TRUE(has(text, "peak RSS:    100.2 MiB\n") || has(text, "peak RSS:    100.3 MiB\n"));
    EXPECT_FALSE(has(text, "baseline:"));
    EXPECT_EQ(code_of([&] { r.check(); }), ExitCode::ok);

    r.baseline = BaselineReport{"file", "base.pt", latency(8)};
    r.ratio = 2.0;
    r.cpu_cache = CpuCacheReport{1024, 3, 1, 0, 12.5};
    r.isa = IsaCheck{"amx", "avx512_core_amx", {}, 0.25, false};
    j = r.to_json();
    EXPECT_EQ(j["baseline"]["kind"], "file");
    EXPECT_EQ(j["baseline"]["latency_ms"]["median"], 8.0);
    EXPECT_EQ(j["ratio"], 2.0);
    EXPECT_EQ(j["cpu_cache"]["limit_mb"], 1024);
    EXPECT_EQ(j["isa"]["asked"], "avx512_core_amx");
    EXPECT_EQ(j["isa"]["ok"], false);
    text = r.text();
    EXPECT_TRUE(has(text, "baseline:    file (base.pt): median 8.000 ms\n"));
    EXPECT_TRUE(has(text, "ratio:       2.00x (baseline median / candidate median)\n"));
    EXPECT_TRUE(has(text, "cpu cache:   75.0% of 4 large blocks reused, at most 12.5 of 1024 MiB held"));
    EXPECT_TRUE(has(text, "isa:         convolution/matmul ran on nothing through oneDNN; AMX no; asked amx: NO (25% "));
    EXPECT_EQ(code_of([&] { r.check(); }), ExitCode::check_failed);
}

TEST(ProfileReport, JsonHoldsTheLimitsAndTheProfile) {
    ProfileReport r;
    r.model = "m.pt";
    r.dtype = "fp32";
    r.threads = 2;
    r.limits.threads = 2;
    r.limits.read_gbs = 10;
    r.remeasured = true;
    r.profile.iterations = 4;
    r.profile.forward_ms = 8;
    const nlohmann::json j = r.to_json();
    EXPECT_EQ(j["limits"]["remeasured"], true);
    EXPECT_EQ(j["limits"]["threads"], 2);
    EXPECT_TRUE(j.contains("rows"));
    EXPECT_TRUE(has(r.text(), "limits:      measured on 2 threads (twice, the higher figures): "));
    EXPECT_TRUE(has(r.text(), "forward:     2.000 ms profiled"));
}

LlmBenchReport llm_bench_report() {
    LlmBenchReport r;
    r.model = "dir";
    r.architecture = "LlamaForCausalLM";
    r.weights = "bf16";
    r.threads = 2;
    r.result.first_token_ms = {10, 10, 11, 12, 9};
    r.result.next_token_ms = {4, 4, 5, 6, 3};
    r.result.prefill_gflops = 50;
    r.result.weight_bytes_per_token = 100'000'000;
    r.result.tokens_per_second = 250;
    r.result.peak_rss_bytes = 512 << 20;
    r.result.resident_weight_bytes = 400 << 20;
    r.load_peak_rss_bytes = 450 << 20;
    r.load_ms = 1500;
    return r;
}

TEST(LlmBenchReport, GivenLimits) {
    LlmBenchReport r = llm_bench_report();
    r.limits.peak_gflops = 500;
    r.limits.peak_given = true;
    r.limits.bandwidth_gbs = 50;
    r.limits.bandwidth_given = true;
    EXPECT_DOUBLE_EQ(r.bandwidth_floor_ms(), 2.0);
    const nlohmann::json j = r.to_json();
    EXPECT_EQ(j["limits"], nlohmann::json({{"measured", false}, {"peak_gflops", 500.0}, {"peak_source", "given"},
                                           {"peak_kind", "given"}, {"bandwidth_gbs", 50.0},
                                           {"bandwidth_source", "given"}, {"flags", nlohmann::json::array()}}));
    EXPECT_DOUBLE_EQ(j["bandwidth_floor_ms"].get<double>(), 2.0);
    EXPECT_DOUBLE_EQ(j["next_token_over_floor"].get<double>(), 2.0);
    EXPECT_DOUBLE_EQ(j["prefill_share_of_peak"].get<double>(), 0.1);
    EXPECT_EQ(r.text(),
              "LlamaForCausalLM bf16, batch 1, 32 in / 32 out, 2 threads, 3 iterations\n"
              "first token: mean 10.00 ms, p50 10.00 ms (50.0 GFLOP/s, 10.0% of the given peak 500)\n"
              "next token:  mean 4.00 ms, p50 4.00, p90 5.00, p99 6.00 ms (2.00x the bandwidth floor 2.00 ms at given "
              "50.0 GB/s)\n"
              "throughput:  250.0 tokens/s; weights 100.0 MB/token; peak RSS 512 MiB, 1.28x the 400 MiB of weights "
              "held\n"
              "load:        1.50 s, peak RSS 450 MiB\n");
    EXPECT_EQ(j["resident_weight_bytes"], 400 << 20);
    EXPECT_EQ(j["load_peak_rss_bytes"], 450 << 20);
    EXPECT_DOUBLE_EQ(j["load_ms"].get<double>(), 1500);
    EXPECT_DOUBLE_EQ(j["peak_rss_over_resident_weights"].get<double>(), 1.28);
}

TEST(LlmBenchReport, MeasuredLimits) {
    LlmBenchReport r = llm_bench_report();
    bench::MachineLimits m;
    m.threads = 2;
    m.read_gbs = 20;
    m.fp32_fma_gflops = 200;
    r.limits.measured = m;
    r.limits.peak_gflops = 200;
    r.limits.peak_kind = "fp32_fma";
    r.limits.bandwidth_gbs = 20;
    const nlohmann::json j = r.to_json()["limits"];
    EXPECT_EQ(j["measured"], true);
    EXPECT_EQ(j["threads"], 2);
    EXPECT_EQ(j["peak_source"], "measured");
    EXPECT_EQ(j["peak_kind"], "fp32_fma");
    EXPECT_EQ(j["bandwidth_source"], "measured");
    EXPECT_TRUE(has(r.text(), "25.0% of the measured peak 200)"));
}

// A measured limit the run beats is measured again; still beaten, it is flagged (never a share
// above the limit as a fact); beaten only by the first measurement, the higher figure stands.
TEST(LlmBenchReport, LimitsTheRunBeatIsMeasuredAgainThenFlagged) {
    const auto measured_report = [] {
        LlmBenchReport r = llm_bench_report();  // 50 GFLOP/s prefill, 4 ms decode of 100 MB
        bench::MachineLimits m;
        m.fp32_fma_gflops = 40;  // below the run's 50
        m.read_gbs = 20;         // floor 5 ms: above the run's 4 ms
        r.limits.measured = m;
        r.limits.peak_gflops = 40;
        r.limits.peak_kind = "fp32_fma";
        r.limits.bandwidth_gbs = 20;
        return r;
    };
    LlmBenchReport low = measured_report();
    int calls = 0;
    reconcile_limits(low, [&] {
        ++calls;
        bench::MachineLimits again;
        again.fp32_fma_gflops = 45;
        again.read_gbs = 22;
        return again;
    });
    EXPECT_EQ(calls, 1);
    EXPECT_DOUBLE_EQ(low.limits.peak_gflops, 45);
    EXPECT_EQ(low.limits.flags,
              (std::vector<std::string>{"prefill_above_measured_peak", "decode_above_measured_bandwidth"}));
    EXPECT_EQ(low.to_json()["limits"]["flags"].size(), 2u);
    EXPECT_TRUE(has(low.text(), "note:        the prefill ran faster than the measured peak"));

    LlmBenchReport fixed = measured_report();
    reconcile_limits(fixed, [] {
        bench::MachineLimits again;
        again.fp32_fma_gflops = 400;
        again.read_gbs = 60;
        return again;
    });
    EXPECT_DOUBLE_EQ(fixed.limits.peak_gflops, 400);
    EXPECT_DOUBLE_EQ(fixed.limits.bandwidth_gbs, 60);
    EXPECT_TRUE(fixed.limits.flags.empty());

    LlmBenchReport given = measured_report();  // the user's figures are not second-guessed
    given.limits.peak_given = given.limits.bandwidth_given = true;
    reconcile_limits(given, [&]() -> bench::MachineLimits { ADD_FAILURE() << "measured again"; return {}; });
    EXPECT_TRUE(given.limits.flags.empty());
}

// A finite perplexity over 10 tokens of one 64-token window.
PerplexityReport perplexity_report(const std::string &weights, double perplexity) {
    PerplexityReport r;
    r.model = "dir";
    r.weights = weights;
    r.text_file = "t.txt";
    r.context = 64;
    r.stride = 32;
    r.result.perplexity = perplexity;
    r.result.nll = 25;
    r.result.tokens = 11;
    r.result.scored = 10;
    r.result.windows = 1;
    return r;
}

TEST(PerplexityReport, FiniteAndGated) {
    PerplexityReport r = perplexity_report("bf16", 12.5);
    EXPECT_TRUE(r.ok());
    nlohmann::json j = r.to_json();
    EXPECT_EQ(j["text"], "t.txt");
    EXPECT_DOUBLE_EQ(j["nll_mean"].get<double>(), 2.5);
    EXPECT_TRUE(j["max_ppl"].is_null());
    EXPECT_TRUE(j["non_finite_position"].is_null());
    EXPECT_EQ(r.text(), "perplexity 12.5000 over 10 tokens (1 windows of 64, stride 32)\n");
    EXPECT_EQ(code_of([&] { r.check(); }), ExitCode::ok);
    r.max_ppl = 10;
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.to_json()["ok"], false);
    EXPECT_EQ(code_of([&] { r.check(); }), ExitCode::check_failed);
}

TEST(PerplexityReport, AgainstTheBaseline) {
    PerplexityReport r = perplexity_report("int4 g128", 12.6);
    EXPECT_TRUE(std::isnan(r.increase_percent()));  // no baseline
    EXPECT_TRUE(r.to_json()["baseline"].is_null());
    r.baseline = PerplexityBaseline{"fp32", {}};
    r.baseline->result.perplexity = 12.0;
    r.baseline->result.scored = 10;
    EXPECT_NEAR(r.increase_percent(), 5.0, 1e-12);
    EXPECT_EQ(r.text(), "perplexity 12.6000 over 10 tokens (1 windows of 64, stride 32)\n"
                        "baseline (fp32) perplexity 12.0000: +5.00%\n");
    nlohmann::json j = r.to_json();
    EXPECT_EQ(j["baseline"]["weights"], "fp32");
    EXPECT_DOUBLE_EQ(j["baseline"]["perplexity"].get<double>(), 12.0);
    EXPECT_NEAR(j["increase_percent"].get<double>(), 5.0, 1e-12);
    EXPECT_TRUE(j["max_increase_percent"].is_null());
    EXPECT_EQ(code_of([&] { r.check(); }), ExitCode::ok);
    r.max_increase = 5.5;
    EXPECT_TRUE(r.ok());
    r.max_increase = 4.5;
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.text(), "perplexity 12.6000 over 10 tokens (1 windows of 64, stride 32)\n"
                        "baseline (fp32) perplexity 12.0000: +5.00% (limit 4.50%)\n");
    try {
        r.check();
        ADD_FAILURE() << "check() passed above --max-increase";
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::check_failed);
        EXPECT_TRUE(has(e.what(), "5.00% above the baseline's")) << e.what();
        EXPECT_TRUE(has(e.what(), "more than --max-increase 4.50%")) << e.what();
    }
    // A baseline that is not finite fails the run whatever the limit.
    r.max_increase.reset();
    r.baseline->result.finite = false;
    r.baseline->result.perplexity = std::numeric_limits<double>::infinity();
    EXPECT_FALSE(r.ok());
    EXPECT_TRUE(r.to_json()["increase_percent"].is_null());
    EXPECT_EQ(code_of([&] { r.check(); }), ExitCode::check_failed);
}

TEST(PerplexityReport, NotFinite) {
    PerplexityReport r;
    r.result.perplexity = std::numeric_limits<double>::quiet_NaN();
    r.result.finite = false;
    r.result.non_finite_position = 7;
    r.result.scored = 6;
    const nlohmann::json j = r.to_json();
    EXPECT_TRUE(j["perplexity"].is_null());
    EXPECT_EQ(j["finite"], false);
    EXPECT_EQ(j["non_finite_position"], 7);
    EXPECT_EQ(r.text(), "perplexity not finite (NaN/Inf loss at token 7 of the text; 6 tokens scored before)\n");
    EXPECT_EQ(code_of([&] { r.check(); }), ExitCode::check_failed);
}

TEST(GenerateReport, IdsTextAndStreamed) {
    GenerateReport r;
    r.model = "dir";
    r.result.prompt_ids = {{1, 2}, {3}};
    r.result.ids = {{4, 5}, {6}};
    r.result.text = {"", ""};
    r.result.stop_reason = {"length", "non_finite"};
    r.result.step_ms = {2, 4};
    EXPECT_EQ(r.text(), "4,5\n6\n");  // no tokenizer: ids
    nlohmann::json j = r.to_json();
    EXPECT_EQ(j["sequences"].size(), 2u);
    EXPECT_TRUE(j["sequences"][0]["text"].is_null());
    EXPECT_EQ(j["sequences"][1]["non_finite_logits"], true);
    EXPECT_TRUE(j["non_finite_logits"].is_null());
    EXPECT_DOUBLE_EQ(j["timings"]["next_token_ms_mean"].get<double>(), 3.0);
    r.tokenizer = true;
    r.result.text = {"ab", "c"};
    EXPECT_EQ(r.text(), "ab\nc\n");
    EXPECT_EQ(r.to_json()["sequences"][0]["text"], "ab");
    r.streamed = true;
    EXPECT_EQ(r.text(), "\n");
    r.result.non_finite = {1, 1, 3};
    EXPECT_EQ(r.to_json()["non_finite_logits"], nlohmann::json({{"sequence", 1}, {"step", 1}, {"position", 3}}));
}

TEST(OptimizeReport, PipelineReportWithTheFileFacts) {
    OptimizeReport r;
    r.in = "in.pt";
    r.out = "out.pt";
    r.dtype = "bf16";
    r.level = "O1";
    r.sample_inputs = "1x3x8x8:fp32";
    r.pipeline = {{"mode", "prepacked"}, {"passes", nlohmann::json::array()}, {"warnings", nlohmann::json::array()}};
    r.ops_before = {{"aten::conv2d", 2}};
    r.ops_after = {{"ipex::convolution", 1}};
    r.bytes_before = 100;
    r.bytes_after = 80;
    nlohmann::json j = r.to_json();
    EXPECT_EQ(j["mode"], "prepacked");
    EXPECT_EQ(j["input"], "in.pt");
    EXPECT_EQ(j["output"], "out.pt");
    EXPECT_EQ(j["op_histogram"]["before"]["aten::conv2d"], 2);
    EXPECT_EQ(j["op_histogram"]["after"]["ipex::convolution"], 1);
    EXPECT_EQ(j["bytes"], nlohmann::json({{"before", 100}, {"after", 80}}));
    EXPECT_FALSE(j.contains("woq"));
    EXPECT_EQ(r.text(), "wrote out.pt (bf16, O1; no rewrites)");
    r.applied = {{"freeze", 1}, {"remove_dropout", 0}, {"fold_conv_bn", 2}};
    r.woq = nlohmann::json{{"lowp_mode", "bf16"}};
    EXPECT_EQ(r.text(), "wrote out.pt (bf16, O1; freeze=1 fold_conv_bn=2)");
    EXPECT_EQ(r.to_json()["woq"]["lowp_mode"], "bf16");
}

TEST(QuantizeReport, Line) {
    const QuantizeReport r{"q.pt", {{"mode", "static"}, {"int8_ops", 7}}};
    EXPECT_EQ(r.text(), "wrote q.pt (static int8: 7 ops)");
}

}  // namespace
}  // namespace ipex::commands
