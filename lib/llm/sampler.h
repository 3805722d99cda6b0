// Next-token choice from logits: greedy, or temperature / top-k / top-p sampling with a
// seeded generator; repetition penalty as in Hugging Face (logit / R if positive, * R if
// negative, for every token already in the sequence). Buffers are kept between calls.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace ipex::llm {

struct SamplingOptions {
    bool greedy = true;
    double temperature = 1.0;
    int64_t top_k = 0;      // 0: all
    double top_p = 1.0;     // 1: all
    uint64_t seed = 0;
    double repetition_penalty = 1.0;
};

// Exit 2 naming the option unless: --temperature > 0 (when sampling), --top-k in
// [0, kMaxVocab], --top-p in (0, 1], --repetition-penalty finite and > 0.
void check_sampling(const SamplingOptions &options);

// Whether every one of the n logits is a finite number.
bool all_finite(const float *logits, int64_t n);

// Returned by Sampler::next when the logits hold NaN or Inf: no token is meaningful then.
constexpr int32_t kNoToken = -1;

class Sampler {
public:
    Sampler(const SamplingOptions &options, int64_t vocab);  // check_sampling(options)
    // history: the tokens of the sequence so far (prompt and generated). kNoToken when a
    // logit is NaN or infinite (never a token picked because NaN compares false).
    int32_t next(const float *logits, const std::vector<int32_t> &history);

private:
    SamplingOptions options_;
    int64_t vocab_;
    std::mt19937_64 rng_;
    std::vector<float> work_;
    std::vector<int32_t> order_;
};

}  // namespace ipex::llm
