// The requests of the command drivers (lib/commands): the option checks they make before any
// file is read, the one --threads range, --group-size, and --lowp-mode auto per command.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/cpu_features.h"
#include "base/isa.h"
#include "commands/bench.h"
#include "commands/generate.h"
#include "commands/json_output.h"
#include "commands/llm_bench.h"
#include "commands/llm_load.h"
#include "commands/optimize.h"
#include "commands/perplexity.h"
#include "commands/quantize.h"
#include "commands/threads.h"
#include "commands/weight_only.h"
#include "core/system_info.h"
#include "unit/test_errors.h"

namespace ipex::commands {
namespace {

using testing::code_of;

// A path no test creates: a driver that read it would fail with exit 3, not 2.
const char *kMissing = "/nonexistent/ipex-tool-commands-test";

TEST(Threads, OneRangeForEveryCommand) {
    EXPECT_EQ(thread_count(std::nullopt), default_threads());
    EXPECT_EQ(thread_count(1), 1);
    EXPECT_EQ(thread_count(kMaxThreads), kMaxThreads);
    for (int bad : {0, -1, kMaxThreads + 1}) EXPECT_EQ(code_of([&] { thread_count(bad); }), ExitCode::usage) << bad;
    try {
        thread_count(100000);
        ADD_FAILURE() << "no error";
    } catch (const Error &e) {
        EXPECT_STREQ(e.what(), "--threads must be in [1, 4096], got 100000");
    }
}

TEST(WeightOnly, GroupSizeAndBits) {
    WoqRequest woq;
    EXPECT_EQ(woq.bits(), 0);
    EXPECT_EQ(code_of([&] { woq.check(); }), ExitCode::ok);
    woq.dtype = "int4";
    EXPECT_EQ(woq.bits(), 4);
    woq.dtype = "int8";
    EXPECT_EQ(woq.bits(), 8);
    for (int64_t ok : {int64_t(-1), int64_t(1), int64_t(128), kMaxGroupSize}) {
        woq.group_size = ok;
        EXPECT_EQ(code_of([&] { woq.check(); }), ExitCode::ok) << ok;
    }
    for (int64_t bad : {int64_t(0), int64_t(-2), kMaxGroupSize + 1}) {
        woq.group_size = bad;
        EXPECT_EQ(code_of([&] { woq.check(); }), ExitCode::usage) << bad;
    }
}

TEST(WeightOnly, LowpAutoPerCommand) {
    const CpuFeatures &cpu = cpu_features();
    const bool bf16_cpu = cpu.avx512_bf16 || (cpu.amx_bf16 && cpu.amx_permitted);
    for (const char *mode : {"fp32", "bf16", "int8"})
        for (LowpAuto rule : {LowpAuto::bf16_model_or_cpu, LowpAuto::bf16_model_best_dot})
            EXPECT_EQ(resolve_lowp_mode(std::string(mode), "fp32", rule), mode);
    // optimize: a bf16 model always, an fp32 one where the CPU has BF16 dot products
    EXPECT_EQ(resolve_lowp_mode(std::nullopt, "bf16", LowpAuto::bf16_model_or_cpu), "bf16");
    EXPECT_EQ(resolve_lowp_mode(std::string("auto"), "fp32", LowpAuto::bf16_model_or_cpu), bf16_cpu ? "bf16" : "fp32");
    EXPECT_NE(lowp_auto_text(LowpAuto::bf16_model_or_cpu), lowp_auto_text(LowpAuto::bf16_model_best_dot));
}

// LLM runs: auto with a bf16 model gives int8 activations where the CPU has no BF16 dot
// products but AVX2 (bf16 would run as fp32 there), and to int4 weights where it has
// AVX512-BF16 and VNNI without AMX (IPEX's AUTO: INT8 for INT4 weights); an fp32 model keeps
// fp32; a named mode stays. The request leaves auto to the loader, which knows a checkpoint's bits.
TEST(LlmLoad, LowpAutoByCpuAndWeightBits) {
    const CpuFeatures &cpu = cpu_features();
    const bool bf16_cpu = cpu.avx512_bf16 || (cpu.amx_bf16 && cpu.amx_permitted);
    const bool int4_int8 = cpu.avx512_bf16 && cpu.avx512_vnni && !(cpu.amx_bf16 && cpu.amx_permitted);
    const std::string bf16_model = bf16_cpu ? "bf16" : ipex::isa::avx2_fma() ? "int8" : "fp32";
    const LowpAuto rule = LowpAuto::bf16_model_best_dot;
    EXPECT_EQ(resolve_lowp_mode(std::string("auto"), "bf16", rule), bf16_model);
    EXPECT_EQ(resolve_lowp_mode(std::string("auto"), "bf16", rule, 8), bf16_model);
    EXPECT_EQ(resolve_lowp_mode(std::string("auto"), "bf16", rule, 4), int4_int8 ? "int8" : bf16_model);
    EXPECT_EQ(resolve_lowp_mode(std::nullopt, "fp32", rule), "fp32");
    EXPECT_EQ(resolve_lowp_mode(std::nullopt, "fp32", rule, 4), "fp32");
    for (const char *mode : {"fp32", "bf16", "int8"})
        for (int bits : {0, 4, 8}) EXPECT_EQ(resolve_lowp_mode(std::string(mode), "bf16", rule, bits), mode);
    LlmLoadRequest load;  // --dtype bf16, --lowp-mode unset
    EXPECT_EQ(load.options().lowp_mode, "auto");
    load.woq.lowp_mode = "bf16";
    EXPECT_EQ(load.options().lowp_mode, "bf16");
    EXPECT_NE(lowp_auto_text(rule).find("int8"), std::string::npos);
}

TEST(LlmLoad, OptionsAndChecks) {
    LlmLoadRequest load;
    load.dtype = "fp32";
    load.woq.dtype = "int4";
    llm::LoadOptions o = load.options();
    EXPECT_EQ(o.dtype, "fp32");
    EXPECT_EQ(o.woq_bits, 4);
    EXPECT_EQ(o.group_size, kGroupAuto);
    EXPECT_EQ(o.lowp_mode, "auto");  // resolved by the loader (fp32 for an fp32 model)
    load.woq.group_size = 32;
    load.woq.lowp_mode = "int8";
    o = load.options();
    EXPECT_EQ(o.group_size, 32);
    EXPECT_EQ(o.lowp_mode, "int8");
    EXPECT_EQ(code_of([&] { load.check(); }), ExitCode::ok);
    load.threads = 0;
    EXPECT_EQ(code_of([&] { load.check(); }), ExitCode::usage);
    load.threads = 2;
    load.woq.group_size = 0;
    EXPECT_EQ(code_of([&] { load.check(); }), ExitCode::usage);
}

TEST(Generate, SamplingFromTheOptionsGiven) {
    GenerateRequest r;
    llm::GenerateOptions o = r.options();
    EXPECT_TRUE(o.sampling.greedy);  // no sampling option: greedy
    EXPECT_EQ(o.max_new_tokens, 128);
    EXPECT_EQ(o.max_length, 0);
    r.temperature = 0.7;
    r.seed = 5;
    r.max_length = 64;
    o = r.options();
    EXPECT_FALSE(o.sampling.greedy);
    EXPECT_DOUBLE_EQ(o.sampling.temperature, 0.7);
    EXPECT_EQ(o.sampling.seed, 5u);
    EXPECT_EQ(o.max_length, 64);
    r.greedy = true;
    EXPECT_TRUE(r.options().sampling.greedy);
    r.max_length = 0;
    EXPECT_EQ(code_of([&] { r.options(); }), ExitCode::usage);
}

TEST(Generate, UsageErrorsBeforeTheModelIsRead) {
    GenerateRequest r;
    r.model = kMissing;
    const auto sink = [](const std::string &) {};
    EXPECT_EQ(code_of([&] { run_generate(r, sink); }), ExitCode::usage);  // no prompt
    r.prompt_ids = {"1,2,x"};
    EXPECT_EQ(code_of([&] { run_generate(r, sink); }), ExitCode::usage);
    r.prompt_ids = {"1,2,3"};
    r.load.threads = 5000;
    EXPECT_EQ(code_of([&] { run_generate(r, sink); }), ExitCode::usage);
    r.load.threads.reset();
    EXPECT_EQ(code_of([&] { run_generate(r, sink); }), ExitCode::bad_input);  // now the model directory
}

TEST(Perplexity, UsageErrorsBeforeTheTextIsRead) {
    PerplexityRequest r;
    r.model = kMissing;
    r.text = kMissing;
    r.context = 1;
    EXPECT_EQ(code_of([&] { run_perplexity(r); }), ExitCode::usage);
    r.context.reset();
    r.max_ppl = 0;
    EXPECT_EQ(code_of([&] { run_perplexity(r); }), ExitCode::usage);
    r.max_ppl.reset();
    r.load.woq.group_size = -5;
    EXPECT_EQ(code_of([&] { run_perplexity(r); }), ExitCode::usage);
    r.load.woq.group_size.reset();
    r.baseline = true;  // nothing to compare: no --qconfig, no --woq-dtype
    EXPECT_EQ(code_of([&] { run_perplexity(r); }), ExitCode::usage);
    r.baseline = false;
    r.max_increase = 3;  // implies --baseline
    EXPECT_EQ(code_of([&] { run_perplexity(r); }), ExitCode::usage);
    r.load.woq.dtype = "int4";
    r.max_increase = -1;
    EXPECT_EQ(code_of([&] { run_perplexity(r); }), ExitCode::usage);
    r.max_increase.reset();
    r.load.woq.dtype.clear();
    EXPECT_EQ(code_of([&] { run_perplexity(r); }), ExitCode::bad_input);
}

TEST(Bench, UsageErrorsBeforeTheModelIsRead) {
    BenchRequest b;
    b.model = kMissing;
    b.threads = 0;
    EXPECT_EQ(code_of([&] { run_bench(b); }), ExitCode::usage);
    b.threads.reset();
    b.check_isa = "no_such_isa";
    EXPECT_EQ(code_of([&] { run_bench(b); }), ExitCode::usage);
    b.check_isa.clear();
    EXPECT_EQ(code_of([&] { run_bench(b); }), ExitCode::bad_input);

    LlmBenchRequest l;
    l.model = kMissing;
    l.load.threads = 4097;
    EXPECT_EQ(code_of([&] { run_llm_bench(l); }), ExitCode::usage);
}

TEST(Optimize, Int8AndWeightOnlyAreTwoConversions) {
    OptimizeRequest r;
    EXPECT_FALSE(r.wants_woq());
    r.qconfig = "q.json";
    EXPECT_EQ(code_of([&] { r.check_conversions(); }), ExitCode::ok);
    for (int i = 0; i < 3; ++i) {
        OptimizeRequest both = r;
        if (i == 0) both.low_precision_checkpoint = "w.safetensors";
        if (i == 1) both.woq.dtype = "int4";
        if (i == 2) both.woq.lowp_mode = "auto";
        EXPECT_TRUE(both.wants_woq());
        EXPECT_EQ(code_of([&] { both.check_conversions(); }), ExitCode::usage) << i;
    }
}

TEST(Optimize, WeightOnlyOptionsGoTogether) {
    const auto woq_code = [](const std::function<void(OptimizeRequest &)> &set) {
        OptimizeRequest r;
        set(r);
        return code_of([&] { r.check_woq(); });
    };
    EXPECT_EQ(woq_code([](OptimizeRequest &) {}), ExitCode::ok);
    EXPECT_EQ(woq_code([](OptimizeRequest &r) { r.woq.dtype = "int4"; }), ExitCode::ok);
    EXPECT_EQ(woq_code([](OptimizeRequest &r) { r.woq.dtype = "int4", r.woq.group_size = 32; }), ExitCode::ok);
    EXPECT_EQ(woq_code([](OptimizeRequest &r) { r.low_precision_checkpoint = "w", r.allow_partial = true; }),
              ExitCode::ok);
    // each needs what it applies to
    EXPECT_EQ(woq_code([](OptimizeRequest &r) { r.woq.lowp_mode = "int8"; }), ExitCode::usage);
    EXPECT_EQ(woq_code([](OptimizeRequest &r) { r.woq.group_size = 32; }), ExitCode::usage);
    EXPECT_EQ(woq_code([](OptimizeRequest &r) { r.allow_partial = true; }), ExitCode::usage);
    EXPECT_EQ(woq_code([](OptimizeRequest &r) { r.woq.dtype = "int4", r.allow_partial = true; }), ExitCode::usage);
    // a checkpoint carries its own dtype and group size
    EXPECT_EQ(woq_code([](OptimizeRequest &r) { r.low_precision_checkpoint = "w", r.woq.dtype = "int4"; }),
              ExitCode::usage);
    EXPECT_EQ(woq_code([](OptimizeRequest &r) { r.low_precision_checkpoint = "w", r.woq.group_size = 32; }),
              ExitCode::usage);
    // weight-only linears are ipex ops: never --portable
    EXPECT_EQ(woq_code([](OptimizeRequest &r) { r.woq.dtype = "int8", r.portable = true; }), ExitCode::usage);
    EXPECT_EQ(woq_code([](OptimizeRequest &r) { r.woq.dtype = "int8", r.woq.group_size = 0; }), ExitCode::usage);
}

TEST(Optimize, UsageErrorsBeforeTheModelIsRead) {
    OptimizeRequest r;
    r.in = kMissing;
    r.out = "out.pt";
    r.qconfig = kMissing;
    r.woq.dtype = "int4";
    EXPECT_EQ(code_of([&] { run_optimize(r); }), ExitCode::usage);
    r.woq.dtype.clear();
    EXPECT_EQ(code_of([&] { run_optimize(r); }), ExitCode::bad_input);  // the qconfig
}

TEST(Quantize, QconfigOrDynamic) {
    QuantizeRequest r;
    EXPECT_EQ(code_of([&] { r.check(); }), ExitCode::usage);
    r.dynamic = true;
    EXPECT_EQ(code_of([&] { r.check(); }), ExitCode::ok);
    r.qconfig = "q.json";
    EXPECT_EQ(code_of([&] { r.check(); }), ExitCode::usage);
    r.dynamic = false;
    EXPECT_EQ(code_of([&] { r.check(); }), ExitCode::ok);
}

TEST(JsonOutput, WhereTheReportAndItsTextGo) {
    JsonOutput none, out{"-"}, file{"report.json"};
    EXPECT_FALSE(none.wanted());
    EXPECT_EQ(none.text_stream(), &std::cout);
    EXPECT_TRUE(out.to_stdout());
    EXPECT_EQ(out.text_stream(), nullptr);
    EXPECT_TRUE(file.to_file());
    EXPECT_EQ(file.text_stream(), &std::cerr);

    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "ipex_commands_json_test";
    std::filesystem::create_directories(dir);
    const JsonOutput target{(dir / "r.json").string()};
    target.check({});
    target.write({{"a", 1}});
    std::ifstream in(target.target);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(text.str(), "{\n  \"a\": 1\n}\n");
    EXPECT_EQ(code_of([&] { JsonOutput{dir.string()}.check({}); }), ExitCode::usage);  // a directory
    EXPECT_NE(code_of([&] { target.check({target.target}); }), ExitCode::ok);  // an input
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ipex::commands
