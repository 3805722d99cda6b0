// The runtime against the eager PyTorch reference (tests/fixtures/llm_reference.py) on the
// random-weight fixtures of make_llm_fixtures.py.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/isa.h"
#include "llm/generate.h"
#include "llm/model.h"
#include "unit/test_errors.h"

namespace ipex::llm {
namespace {

std::string fixtures() {
    const char *dir = std::getenv("IPEX_FIXTURES");
    return dir ? std::string(dir) + "/llm" : "";
}

const nlohmann::json &manifest() {
    static const nlohmann::json j = [] {
        std::ifstream in(fixtures() + "/llm.json");
        nlohmann::json m;
        if (in) in >> m;
        return m;
    }();
    return j;
}

#define NEED_FIXTURES()                                                                        \
    if (manifest().is_null()) GTEST_SKIP() << "no fixtures: run make_llm_fixtures.py (ctest does)"

struct Case {
    std::string dir;
    std::vector<int32_t> prompt, greedy;
    int64_t vocab;
    std::vector<float> ref;  // [prompt, vocab]
};

Case load_case(const std::string &name) {
    const auto &m = manifest()["models"][name];
    Case c;
    c.dir = m["dir"].get<std::string>();
    c.prompt = m["prompt"].get<std::vector<int32_t>>();
    c.greedy = m["greedy"].get<std::vector<int32_t>>();
    c.vocab = m["vocab"].get<int64_t>();
    std::ifstream in(m.value("ref_logits", c.dir + "/ref_logits.bin"), std::ios::binary);
    c.ref.resize(c.prompt.size() * static_cast<size_t>(c.vocab));
    in.read(reinterpret_cast<char *>(c.ref.data()), static_cast<std::streamsize>(c.ref.size() * 4));
    return c;
}

double cosine(const float *a, const float *b, int64_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < n; ++i) {
        ab += static_cast<double>(a[i]) * b[i];
        aa += static_cast<double>(a[i]) * a[i];
        bb += static_cast<double>(b[i]) * b[i];
    }
    return ab / std::sqrt(aa * bb);
}

// Lowest cosine over the prompt's rows: all positions in one prefill.
double prefill_cosine(const Case &c, const LoadOptions &options) {
    auto model = Model::load(c.dir, options);
    Session s(model, 1, std::max<int64_t>(64, static_cast<int64_t>(c.prompt.size())));
    const Logits l = s.prefill({c.prompt}, true);
    EXPECT_EQ(l.rows, static_cast<int64_t>(c.prompt.size()));
    double worst = 1;
    for (int64_t r = 0; r < l.rows; ++r) worst = std::min(worst, cosine(l.row(r), c.ref.data() + r * c.vocab, c.vocab));
    return worst;
}

LoadOptions opts(const std::string &dtype, int bits = 0, const std::string &lowp = "auto") {
    LoadOptions o;
    o.dtype = dtype;
    o.woq_bits = bits;
    o.group_size = 32;
    o.lowp_mode = lowp;
    return o;
}

// One fixture per family and variant (make_llm_fixtures.py): dense, fused, Gemma, experts.
const char *const kFamilies[] = {"llama", "mistral", "qwen2", "llama3", "qwen3", "phi3", "phi3_long",
                                 "gemma2", "gemma3", "gemma3_mm", "mixtral", "qwen2_moe", "qwen3_moe",
                                 "olmoe", "qwen3_yarn", "llama_dynamic", "gguf_llama_f32", "gguf_llama_q8_0",
                                 "gguf_llama_q4_0", "gguf_llama_q4_1", "gguf_llama_q4_0_mixed", "gguf_qwen2_f16", "gguf_qwen3_bf16", "gguf_gemma2_f32",
                                 "gguf_gemma3_f32", "gguf_phi3_f32", "gguf_mixtral_f32", "gguf_mixtral_q8_0",
                                 "gguf_qwen2_moe_f32", "gguf_qwen3_moe_f32", "gguf_gemma2_q4_0", "qwen2_moe_wide"};

TEST(LlmModel, Fp32MatchesReference) {
    NEED_FIXTURES();
    for (const char *name : kFamilies)
        EXPECT_GE(prefill_cosine(load_case(name), opts("fp32")), 0.99999) << name;
}

TEST(LlmModel, Bf16MatchesReference) {
    NEED_FIXTURES();
    for (const char *name : kFamilies)
        EXPECT_GE(prefill_cosine(load_case(name), opts("bf16")), 0.999) << name;
}

// GPTQ/AWQ checkpoints load as they are; the reference runs on the dequantized weights.
TEST(LlmModel, GptqAndAwqMatchDequantizedReference) {
    NEED_FIXTURES();
    for (const char *name : {"llama_gptq", "mistral_awq"})
        for (const char *lowp : {"fp32", "bf16", "int8"}) {
            const double threshold = std::string(lowp) == "int8" ? 0.995 : 0.999;
            EXPECT_GE(prefill_cosine(load_case(name), opts(std::string(lowp) == "fp32" ? "fp32" : "bf16", 0, lowp)),
                      threshold)
                << name << " " << lowp;
        }
}

// lowp "auto" of a bf16 model: int8 activations for int4 weights, quantized on load or a 4-bit
// GPTQ/AWQ checkpoint's, where the CPU has AVX512-BF16 and VNNI (IPEX's AUTO); bf16 for int8 weights.
TEST(LlmModel, LowpAutoFollowsTheWeightBits) {
    NEED_FIXTURES();
    if (!isa::avx512_bf16() || !isa::avx512_vnni() || isa::amx_bf16_present())
        GTEST_SKIP() << "the rule under test applies to CPUs with AVX512-BF16 and VNNI and no AMX";
    EXPECT_EQ(Model::load(load_case("llama").dir, opts("bf16", 4))->weights_description(), "int4 g32 (lowp int8)");
    EXPECT_EQ(Model::load(load_case("llama").dir, opts("bf16", 8))->weights_description(), "int8 g32 (lowp bf16)");
    for (const char *name : {"llama_gptq", "mistral_awq"}) {
        const std::string d = Model::load(load_case(name).dir, opts("bf16"))->weights_description();
        EXPECT_NE(d.find("(lowp int8)"), std::string::npos) << name << ": " << d;
    }
}

// GGUF q4_0 / q4_1 / q8_0 / q4_K / q5_K projections load weight-only as stored (int4 / int8,
// groups of 32): with fp32 activations they give the dense dequantized run's greedy ids and its
// logits within 1e-5 (the mixture: 1e-5 of its largest logit, about 7: its experts' sums are
// longer); in the mixed file the head is q8_0, the embedding f16 and layer 0's v f16 (its merged
// q/k/v runs dense), all per tensor. The Q4_K_M-style file (q4_K, q5_K, q6_K converted): below.
TEST(LlmModel, GgufWeightOnlyEqualsDequantizedRun) {
    NEED_FIXTURES();
    const std::pair<const char *, const char *> cases[] = {
        {"gguf_llama_q4_0", "int4 g32 (lowp fp32"}, {"gguf_llama_q4_1", "int4 g32 (lowp fp32"},
        {"gguf_llama_q8_0", "int8 g32 (lowp fp32"}, {"gguf_llama_q4_0_mixed", "int4/int8 g32 (lowp fp32"},
        {"gguf_mixtral_q8_0", "int8 g32 (lowp fp32"}, {"gguf_gemma2_q4_0", "int4 g32 (lowp fp32"}};
    for (const auto &[name, description] : cases) {
        SCOPED_TRACE(name);
        const Case c = load_case(name);
        LoadOptions woq = opts("fp32", 0, "fp32"), dense = woq;
        woq.group_size = 0;  // as generate passes it: the file's groups are kept
        dense.gguf_dequantize = true;
        auto a = Model::load(c.dir, woq), b = Model::load(c.dir, dense);
        EXPECT_EQ(a->weights_description().rfind(description, 0), 0u) << a->weights_description();
        EXPECT_EQ(b->weights_description(), "fp32");
        EXPECT_LT(a->resident_weight_bytes(), b->resident_weight_bytes());
        // A quantized embedding stays as stored (the mixed file's is f16: dense, as the dequantized
        // run's fp32): q4_0 rows of 16 bytes and 8 of scale and zero per 32 values, q8_0 32 + 8.
        const ModelConfig &cfg = a->config();
        const uint64_t values = static_cast<uint64_t>(cfg.vocab_size * cfg.hidden_size);
        const std::string kind = name;
        if (kind == "gguf_llama_q4_0_mixed") {
            EXPECT_EQ(a->embedding_bytes(), b->embedding_bytes());
        } else {
            EXPECT_EQ(b->embedding_bytes(), values * 4);
            EXPECT_EQ(a->embedding_bytes(), kind.find("q8_0") != std::string::npos ? values / 32 * 40 : values / 32 * 24);
        }
        Session sa(a, 1, 64), sb(b, 1, 64);
        const Logits la = sa.prefill({c.prompt}, true);
        const std::vector<float> first(la.data, la.data + la.rows * la.vocab);
        const Logits lb = sb.prefill({c.prompt}, true);
        float worst = 0, largest = 0;
        for (size_t i = 0; i < first.size(); ++i) {
            worst = std::max(worst, std::fabs(first[i] - lb.data[i]));
            largest = std::max(largest, std::fabs(lb.data[i]));
        }
        EXPECT_LE(worst, std::string(name) == "gguf_mixtral_q8_0" ? 1e-5f * largest : 1e-5f) << "largest " << largest;
        GenerateOptions o;
        o.max_new_tokens = static_cast<int64_t>(c.greedy.size());
        EXPECT_EQ(generate(a, nullptr, {c.prompt}, o, nullptr).ids[0], generate(b, nullptr, {c.prompt}, o, nullptr).ids[0]);
    }
}

// The Q4_K_M-style file mixes q4_K (int4), q5_K (int8, one down projection) and q6_K (the head,
// and layers 0 and 3's v and down): q6_K is converted to int8 g32 within half an int8 step of
// each group (checkpoint/gguf_woq.h), so every projection runs weight-only, the merged q/k/v of
// layers 0 and 3 as int4 q, k and int8 v; its logits stay within cosine 0.9999 of the dense
// dequantized run's and its greedy ids are that run's.
TEST(LlmModel, GgufQ4KMAllWeightOnlyCloseToDequantizedRun) {
    NEED_FIXTURES();
    const Case c = load_case("gguf_llama_q4_k_m");
    LoadOptions woq = opts("fp32", 0, "fp32"), dense = woq;
    woq.group_size = 0;
    dense.gguf_dequantize = true;
    auto a = Model::load(c.dir, woq), b = Model::load(c.dir, dense);
    const std::string d = a->weights_description();
    EXPECT_EQ(d.rfind("int4/int8 g32 (lowp fp32", 0), 0u) << d;
    EXPECT_EQ(d.find("dense"), std::string::npos) << d;
    EXPECT_NE(d.find("5 int8 g32 (q6_K, converted)"), std::string::npos) << d;
    EXPECT_NE(d.find("1 int8 g32 (q5_K)"), std::string::npos) << d;
    EXPECT_LT(a->resident_weight_bytes(), b->resident_weight_bytes());
    Session sa(a, 1, 64), sb(b, 1, 64);
    const Logits la = sa.prefill({c.prompt}, true);
    const std::vector<float> first(la.data, la.data + la.rows * la.vocab);
    const Logits lb = sb.prefill({c.prompt}, true);
    for (int64_t r = 0; r < la.rows; ++r)
        EXPECT_GE(cosine(first.data() + r * la.vocab, lb.row(r), la.vocab), 0.9999) << "position " << r;
    GenerateOptions o;
    o.max_new_tokens = static_cast<int64_t>(c.greedy.size());
    EXPECT_EQ(generate(a, nullptr, {c.prompt}, o, nullptr).ids[0], generate(b, nullptr, {c.prompt}, o, nullptr).ids[0]);
}

TEST(LlmModel, QuantizedOnLoadStaysClose) {
    NEED_FIXTURES();
    EXPECT_GE(prefill_cosine(load_case("llama"), opts("bf16", 8)), 0.999);
    EXPECT_GE(prefill_cosine(load_case("qwen2"), opts("bf16", 8)), 0.999);
    EXPECT_GE(prefill_cosine(load_case("llama"), opts("bf16", 4)), 0.98);
    // Experts, fused and Gemma projections quantized per output channel. Where int8 rounding
    // moves a router's choice between two close experts, a token's output changes more than
    // rounding alone would: the mixtures get a looser bound.
    const auto per_channel_int8 = [](const char *name) {
        LoadOptions o = opts("bf16", 8);
        o.group_size = -1;
        return prefill_cosine(load_case(name), o);
    };
    for (const char *name : {"phi3", "gemma2"}) EXPECT_GE(per_channel_int8(name), 0.999) << name;
    for (const char *name : {"mixtral", "qwen2_moe", "qwen3_moe", "olmoe"})
        EXPECT_GE(per_channel_int8(name), 0.995) << name;
}

// Greedy ids of 32 steps are the reference's (fp32), through the generate driver.
TEST(LlmModel, GreedyIdsMatchReference) {
    NEED_FIXTURES();
    for (const char *name : kFamilies) {
        const Case c = load_case(name);
        auto model = Model::load(c.dir, opts("fp32"));
        GenerateOptions o;
        o.max_new_tokens = static_cast<int64_t>(c.greedy.size());
        const GenerateResult r = generate(model, nullptr, {c.prompt}, o, nullptr);
        EXPECT_EQ(r.ids[0], c.greedy) << name;
    }
}

// After a prefill of the prompt's first `split` tokens, one decode step per token gives each
// position the logits of one prefill of the whole prompt, within `cosine_at_least`.
void decode_steps_match_prefill(const Case &c, const std::shared_ptr<const Model> &model, size_t split,
                                double cosine_at_least) {
    Session full(model, 1, 32), step(model, 1, 32);
    const Logits all = full.prefill({c.prompt}, true);
    const std::vector<float> expected(all.data, all.data + all.rows * all.vocab);
    step.prefill({std::vector<int32_t>(c.prompt.begin(), c.prompt.begin() + split)});
    for (size_t i = split; i < c.prompt.size(); ++i) {
        const Logits l = step.decode({c.prompt[i]});
        EXPECT_GE(cosine(l.row(0), expected.data() + i * static_cast<size_t>(c.vocab), c.vocab), cosine_at_least)
            << "position " << i;
    }
}

// Prefill of a prefix then one decode step per token gives the logits of one full forward.
TEST(LlmModel, PrefillPlusDecodeEqualsFullForward) {
    NEED_FIXTURES();
    for (const char *dtype : {"fp32", "bf16"})
        for (const char *name : {"llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3", "mixtral",
                                 "qwen2_moe", "qwen3_moe", "olmoe"}) {
            SCOPED_TRACE(std::string(name) + " " + dtype);
            const Case c = load_case(name);
            decode_steps_match_prefill(c, Model::load(c.dir, opts(dtype)), 5,
                                       std::string(dtype) == "fp32" ? 0.999999 : 0.9995);
        }
}

// Dense weights read in place from the mapped checkpoint (the default) against copies
// (--no-mmap): the fixtures are written in the safetensors library's order (by name: k_proj,
// o_proj, q_proj, v_proj), so q/k/v are read as three parts apart and gate/up as one view of
// both; bf16 (mistral, stored bf16) through the decode kernel's parts, fp32 (llama) through
// oneDNN per part. Prefill logits and every decode step agree, and the greedy ids are equal.
TEST(LlmModel, WeightsReadInPlaceEqualCopies) {
    NEED_FIXTURES();
    for (const auto &[name, dtype] : {std::pair<const char *, const char *>{"mistral", "bf16"}, {"llama", "fp32"}}) {
        SCOPED_TRACE(std::string(name) + " " + dtype);
        const Case c = load_case(name);
        LoadOptions mapped = opts(dtype), copied = opts(dtype);
        copied.mmap = false;
        const auto in_place = Model::load(c.dir, mapped), copy = Model::load(c.dir, copied);
        EXPECT_NE(in_place->layer_description(0).find("(3 parts)"), std::string::npos) << in_place->layer_description(0);
        EXPECT_EQ(copy->layer_description(0).find("parts"), std::string::npos) << copy->layer_description(0);
        EXPECT_EQ(in_place->resident_weight_bytes(), copy->resident_weight_bytes());
        Session a(in_place, 1, 32), b(copy, 1, 32);
        const Logits la = a.prefill({c.prompt}, true);
        const std::vector<float> pa(la.data, la.data + la.rows * la.vocab);
        const Logits lb = b.prefill({c.prompt}, true);
        for (int64_t r = 0; r < lb.rows; ++r)
            EXPECT_GE(cosine(pa.data() + r * c.vocab, lb.row(r), c.vocab), 0.99999) << "prefill row " << r;
        GenerateOptions o;
        o.max_new_tokens = 8;
        EXPECT_EQ(generate(in_place, nullptr, {c.prompt}, o, nullptr).ids, generate(copy, nullptr, {c.prompt}, o, nullptr).ids);
        for (int32_t t : {5, 17, 3}) {
            const Logits da = a.decode({t});
            const std::vector<float> va(da.row(0), da.row(0) + da.vocab);
            EXPECT_GE(cosine(va.data(), b.decode({t}).row(0), c.vocab), 0.99999) << "decode of " << t;
        }
    }
}

void ragged_batch_equals_single_sequences(const Case &c, const LoadOptions &options) {
    auto model = Model::load(c.dir, options);
    const std::vector<int32_t> a(c.prompt.begin(), c.prompt.begin() + 4), b = c.prompt;
    Session batch(model, 2, 32), one(model, 1, 32), two(model, 1, 32);
    Logits l = batch.prefill({a, b});
    const std::vector<float> la(l.row(0), l.row(0) + l.vocab), lb(l.row(1), l.row(1) + l.vocab);
    EXPECT_GE(cosine(la.data(), one.prefill({a}).row(0), c.vocab), 0.999999);
    EXPECT_GE(cosine(lb.data(), two.prefill({b}).row(0), c.vocab), 0.999999);
    l = batch.decode({7, 9});
    const std::vector<float> da(l.row(0), l.row(0) + l.vocab), db(l.row(1), l.row(1) + l.vocab);
    EXPECT_GE(cosine(da.data(), one.decode({7}).row(0), c.vocab), 0.999999);
    EXPECT_GE(cosine(db.data(), two.decode({9}).row(0), c.vocab), 0.999999);
}

// A ragged batch (prompts of different lengths, no padding) gives each sequence the logits
// it gets alone, in prefill and in the decode steps after it.
TEST(LlmModel, RaggedBatchEqualsSingleSequences) {
    NEED_FIXTURES();
    for (const char *name : {"llama", "mixtral"}) {  // experts see rows of both sequences at once
        SCOPED_TRACE(name);
        ragged_batch_equals_single_sequences(load_case(name), opts("fp32"));
    }
}

// Int4 decode steps of a mixture run every chosen expert's products together
// (Int4Decode::decode_jobs: qwen2_moe_wide's projections are all wide enough for the tiled
// layout, and a shared expert follows). Their logits are a full prefill's (where the shared
// expert's 12 rows run the large-batch kernel), and in a ragged batch each sequence's alone:
// 3 + 5 prompt rows, so every product runs the decode kernel, bit for bit as alone, and two
// decode rows, so some experts run one row of the batch and some both.
TEST(LlmModel, Int4ExpertStepsMatchPrefillAndSingleSequences) {
    NEED_FIXTURES();
    if (!isa::avx512_bf16()) GTEST_SKIP() << "the tiled int4 layout needs AVX512-BF16";
    const Case c = load_case("qwen2_moe_wide");
    auto model = Model::load(c.dir, opts("bf16", 4, "bf16"));
    ASSERT_EQ(model->weights_description(), "int4 g32 (lowp bf16)");
    decode_steps_match_prefill(c, model, 3, 0.9995);
    const std::vector<int32_t> a(c.prompt.begin(), c.prompt.begin() + 3), b(c.prompt.begin() + 3, c.prompt.begin() + 8);
    Session batch(model, 2, 32), one(model, 1, 32), two(model, 1, 32);
    Logits l = batch.prefill({a, b});
    const std::vector<float> la(l.row(0), l.row(0) + l.vocab), lb(l.row(1), l.row(1) + l.vocab);
    const auto same = [&](const float *x, const float *y) { return std::equal(x, x + c.vocab, y); };
    EXPECT_TRUE(same(la.data(), one.prefill({a}).row(0)));
    EXPECT_TRUE(same(lb.data(), two.prefill({b}).row(0)));
    for (const auto &[ta, tb] : {std::pair<int32_t, int32_t>{7, 9}, {11, 11}, {5, 300}}) {
        l = batch.decode({ta, tb});
        const std::vector<float> da(l.row(0), l.row(0) + l.vocab), db(l.row(1), l.row(1) + l.vocab);
        EXPECT_TRUE(same(da.data(), one.decode({ta}).row(0))) << ta;
        EXPECT_TRUE(same(db.data(), two.decode({tb}).row(0))) << tb;
    }
}

TEST(LlmModel, PromptLongerThanMaxLengthIsUsageError) {
    NEED_FIXTURES();
    const Case c = load_case("llama");
    auto model = Model::load(c.dir, opts("fp32"));
    Session s(model, 1, 4);
    EXPECT_EQ(testing::code_of([&] { s.prefill({c.prompt}); }), ExitCode::usage);
}

TEST(LlmModel, BadCheckpointsFailBeforeCompute) {
    NEED_FIXTURES();
    for (const auto &[name, bad] : manifest()["bad"].items()) {
        const auto code = static_cast<ExitCode>(bad["code"].get<int>());
        std::string message;
        try {
            Model::load(bad["dir"].get<std::string>(), opts("fp32"));
        } catch (const Error &e) {
            EXPECT_EQ(e.code(), code) << name << ": " << e.what();
            message = e.what();
        }
        for (const auto &word : bad["words"]) EXPECT_NE(message.find(word.get<std::string>()), std::string::npos) << name << ": " << message;
    }
}

}  // namespace
}  // namespace ipex::llm
