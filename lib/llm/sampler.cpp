#include "llm/sampler.h"

#include <algorithm>
#include <cmath>

#include "base/errors.h"
#include "llm/limits.h"

namespace ipex::llm {

void check_sampling(const SamplingOptions &options) {
    if (!options.greedy && !(options.temperature > 0 && std::isfinite(options.temperature)))
        throw_usage("--temperature must be a number > 0, got " + std::to_string(options.temperature));
    check_count("--top-k", options.top_k, counts::top_k);
    if (!(options.top_p > 0 && options.top_p <= 1))
        throw_usage("--top-p must be in (0, 1], got " + std::to_string(options.top_p));
    if (!(options.repetition_penalty > 0 && std::isfinite(options.repetition_penalty)))
        throw_usage("--repetition-penalty must be a number > 0, got " + std::to_string(options.repetition_penalty));
}

bool all_finite(const float *logits, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(logits[i])) return false;
    return true;
}

Sampler::Sampler(const SamplingOptions &options, int64_t vocab)
    : options_(options), vocab_(vocab), rng_(options.seed) {
    check_sampling(options);
    work_.resize(static_cast<size_t>(vocab));
    order_.resize(static_cast<size_t>(vocab));
}

int32_t Sampler::next(const float *logits, const std::vector<int32_t> &history) {
    if (!all_finite(logits, vocab_)) return kNoToken;
    std::copy(logits, logits + vocab_, work_.begin());
    if (options_.repetition_penalty != 1.0) {
        const float r = static_cast<float>(options_.repetition_penalty);
        std::vector<bool> seen(static_cast<size_t>(vocab_), false);
        for (int32_t id : history) {
            if (id < 0 || id >= vocab_ || seen[static_cast<size_t>(id)]) continue;
            seen[static_cast<size_t>(id)] = true;
            float &v = work_[static_cast<size_t>(id)];
            v = v > 0 ? v / r : v * r;
        }
    }
    if (options_.greedy)
        return static_cast<int32_t>(std::max_element(work_.begin(), work_.end()) - work_.begin());
    const float inv_t = static_cast<float>(1.0 / options_.temperature);
    for (int32_t i = 0; i < vocab_; ++i) order_[static_cast<size_t>(i)] = i;
    const auto by_logit = [&](int32_t a, int32_t b) {
        return work_[static_cast<size_t>(a)] > work_[static_cast<size_t>(b)];
    };
    size_t keep = static_cast<size_t>(vocab_);
    if (options_.top_k > 0 && options_.top_k < vocab_) keep = static_cast<size_t>(options_.top_k);
    std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(keep), order_.end(), by_logit);
    const float top = work_[static_cast<size_t>(order_[0])];
    std::vector<double> prob(keep);
    double total = 0;
    for (size_t i = 0; i < keep; ++i) total += prob[i] = std::exp((work_[static_cast<size_t>(order_[i])] - top) * inv_t);
    if (options_.top_p < 1.0) {  // smallest prefix whose mass reaches top_p
        double cum = 0;
        size_t n = 0;
        while (n < keep) {
            cum += prob[n++] / total;
            if (cum >= options_.top_p) break;
        }
        keep = std::max<size_t>(1, n);
        total = 0;
        for (size_t i = 0; i < keep; ++i) total += prob[i];
    }
    std::uniform_real_distribution<double> uniform(0.0, total);
    double u = uniform(rng_);
    for (size_t i = 0; i < keep; ++i) {
        u -= prob[i];
        if (u <= 0) return order_[i];
    }
    return order_[keep - 1];
}

}  // namespace ipex::llm
