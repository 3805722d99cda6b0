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

class Sampler {
public:
    Sampler(const SamplingOptions &options, int64_t vocab);
    // history: the tokens of the sequence so far (prompt and generated).
    int32_t next(const float *logits, const std::vector<int32_t> &history);

private:
    SamplingOptions options_;
    int64_t vocab_;
    std::mt19937_64 rng_;
    std::vector<float> work_;
    std::vector<int32_t> order_;
};

}  // namespace ipex::llm
