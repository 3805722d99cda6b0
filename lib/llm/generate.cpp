#include "llm/generate.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "core/errors.h"

namespace ipex::llm {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

}  // namespace

GenerateResult generate(std::shared_ptr<const Model> model, const Tokenizer *tokenizer,
                        const std::vector<std::vector<int32_t>> &prompts, const GenerateOptions &options,
                        const std::function<void(int64_t, const std::string &)> &on_text) {
    if (prompts.empty()) throw_usage("no prompt given");
    if (options.max_new_tokens < 0) throw_usage("--max-new-tokens must be >= 0");
    const int64_t batch = static_cast<int64_t>(prompts.size());
    int64_t longest = 0;
    for (size_t b = 0; b < prompts.size(); ++b) {
        if (prompts[b].empty()) throw_usage("prompt " + std::to_string(b + 1) + " has no tokens");
        longest = std::max<int64_t>(longest, static_cast<int64_t>(prompts[b].size()));
    }
    const int64_t max_length = options.max_length > 0 ? options.max_length : longest + options.max_new_tokens;
    if (longest > max_length)
        throw_usage("a prompt has " + std::to_string(longest) + " tokens, longer than --max-length " +
                    std::to_string(max_length));
    const int64_t vocab = model->config().vocab_size;
    GenerateResult r;
    r.prompt_ids = prompts;
    r.ids.resize(prompts.size());
    r.text.resize(prompts.size());
    r.stop_reason.assign(prompts.size(), "length");
    std::vector<Sampler> samplers;
    std::vector<std::unique_ptr<StreamDecoder>> streams;
    std::vector<std::vector<int32_t>> history = prompts;
    for (int64_t b = 0; b < batch; ++b) {
        SamplingOptions s = options.sampling;
        s.seed += static_cast<uint64_t>(b);
        samplers.emplace_back(s, vocab);
        if (tokenizer) streams.push_back(std::make_unique<StreamDecoder>(*tokenizer));
    }
    std::vector<bool> done(prompts.size(), false);
    const auto is_eos = [&](int32_t id) {
        return std::find(options.eos_ids.begin(), options.eos_ids.end(), id) != options.eos_ids.end();
    };
    const auto emit = [&](int64_t b, int32_t id) {
        const size_t i = static_cast<size_t>(b);
        history[i].push_back(id);
        if (is_eos(id)) {
            done[i] = true;
            r.stop_reason[i] = "eos";
            return;
        }
        r.ids[i].push_back(id);
        if (tokenizer) {
            const std::string text = streams[i]->push(id);
            r.text[i] += text;
            if (!text.empty() && on_text) on_text(b, text);
        }
        if (static_cast<int64_t>(r.ids[i].size()) >= options.max_new_tokens ||
            static_cast<int64_t>(history[i].size()) >= max_length)
            done[i] = true;
    };

    const auto t0 = Clock::now();
    if (options.max_new_tokens == 0) return r;
    Session session(model, batch, max_length);
    Logits logits = session.prefill(prompts);
    for (int64_t b = 0; b < batch; ++b) emit(b, samplers[static_cast<size_t>(b)].next(logits.row(b), history[static_cast<size_t>(b)]));
    r.prefill_ms = ms_since(t0);
    std::vector<int32_t> step(static_cast<size_t>(batch));
    while (std::find(done.begin(), done.end(), false) != done.end()) {
        const auto t1 = Clock::now();
        for (int64_t b = 0; b < batch; ++b) step[static_cast<size_t>(b)] = history[static_cast<size_t>(b)].back();
        // Finished sequences ride along (their positions are spare) until all are done.
        bool room = true;
        for (int64_t b = 0; b < batch; ++b) room = room && session.length(b) < max_length;
        if (!room) {
            for (int64_t b = 0; b < batch; ++b) done[static_cast<size_t>(b)] = true;
            break;
        }
        logits = session.decode(step);
        for (int64_t b = 0; b < batch; ++b)
            if (!done[static_cast<size_t>(b)])
                emit(b, samplers[static_cast<size_t>(b)].next(logits.row(b), history[static_cast<size_t>(b)]));
        r.step_ms.push_back(ms_since(t1));
    }
    for (int64_t b = 0; b < batch; ++b)
        if (tokenizer) {
            const std::string tail = streams[static_cast<size_t>(b)]->finish();
            r.text[static_cast<size_t>(b)] += tail;
            if (!tail.empty() && on_text) on_text(b, tail);
        }
    r.total_ms = ms_since(t0);
    return r;
}

PerplexityResult perplexity(std::shared_ptr<const Model> model, const std::vector<int32_t> &ids, int64_t context,
                            int64_t stride) {
    if (context < 2) throw_usage("--context must be >= 2");
    if (stride < 1 || stride > context) throw_usage("--stride must be in [1, --context]");
    const int64_t n = static_cast<int64_t>(ids.size());
    if (n < 2) throw_bad_input("the text has fewer than 2 tokens; nothing to score");
    PerplexityResult r;
    r.tokens = n;
    const auto t0 = Clock::now();
    Session session(model, 1, std::min(context, n));
    int64_t scored_until = 1;  // the first token has no prediction
    for (int64_t begin = 0; scored_until < n; begin += stride) {
        const int64_t end = std::min(begin + context, n);
        session.reset();
        const std::vector<int32_t> window(ids.begin() + begin, ids.begin() + end);
        const Logits logits = session.prefill({window}, true);
        for (int64_t t = std::max(scored_until, begin + 1); t < end; ++t) {
            const float *row = logits.row(t - 1 - begin);
            float m = row[0];
            for (int64_t v = 1; v < logits.vocab; ++v) m = std::max(m, row[v]);
            double sum = 0;
            for (int64_t v = 0; v < logits.vocab; ++v) sum += std::exp(static_cast<double>(row[v] - m));
            r.nll += std::log(sum) + m - row[ids[static_cast<size_t>(t)]];
            ++r.scored;
        }
        scored_until = std::max(scored_until, end);
        ++r.windows;
        if (end == n) break;
    }
    r.perplexity = std::exp(r.nll / static_cast<double>(r.scored));
    r.seconds = ms_since(t0) / 1000.0;
    return r;
}

LatencyStats latency_stats(std::vector<double> ms) {
    LatencyStats s;
    if (ms.empty()) return s;
    std::sort(ms.begin(), ms.end());
    const auto pct = [&](double p) {
        const double pos = p / 100.0 * static_cast<double>(ms.size() - 1);
        const size_t lo = static_cast<size_t>(pos), hi = std::min(ms.size() - 1, lo + 1);
        return ms[lo] + (ms[hi] - ms[lo]) * (pos - static_cast<double>(lo));
    };
    double sum = 0;
    for (double v : ms) sum += v;
    s.mean = sum / static_cast<double>(ms.size());
    s.p50 = pct(50);
    s.p90 = pct(90);
    s.p99 = pct(99);
    s.min = ms.front();
    return s;
}

uint64_t peak_rss_bytes() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<uint64_t>(u.ru_maxrss) * 1024;
}

LlmBenchResult bench_llm(std::shared_ptr<const Model> model, const LlmBenchOptions &o) {
    if (o.input_tokens < 1) throw_usage("--input-tokens must be >= 1");
    if (o.output_tokens < 1) throw_usage("--output-tokens must be >= 1");
    if (o.iterations < 1) throw_usage("--iterations must be >= 1");
    const int64_t vocab = model->config().vocab_size;
    std::mt19937_64 rng(o.seed);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(std::min<int64_t>(vocab, 1 << 30) - 1));
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(o.batch));
    for (auto &p : prompts)
        for (int64_t i = 0; i < o.input_tokens; ++i) p.push_back(pick(rng));
    Session session(model, o.batch, o.input_tokens + o.output_tokens);
    std::vector<double> first, next;
    double generated_ms = 0;
    std::vector<int32_t> step(static_cast<size_t>(o.batch));
    for (int64_t it = 0; it < o.warmup + o.iterations; ++it) {
        session.reset();
        const bool timed = it >= o.warmup;
        const auto t0 = Clock::now();
        Logits logits = session.prefill(prompts);
        for (int64_t b = 0; b < o.batch; ++b) step[static_cast<size_t>(b)] = argmax(logits.row(b), logits.vocab);
        const double f = ms_since(t0);
        if (timed) first.push_back(f);
        for (int64_t k = 1; k < o.output_tokens; ++k) {
            const auto t1 = Clock::now();
            logits = session.decode(step);
            for (int64_t b = 0; b < o.batch; ++b) step[static_cast<size_t>(b)] = argmax(logits.row(b), logits.vocab);
            if (timed) next.push_back(ms_since(t1));
        }
        if (timed) generated_ms += ms_since(t0);
    }
    LlmBenchResult r;
    r.first_token_ms = latency_stats(first);
    r.next_token_ms = latency_stats(next);
    r.tokens_per_second = static_cast<double>(o.batch * o.output_tokens * o.iterations) / (generated_ms / 1000.0);
    r.prefill_gflops = model->prefill_flops(o.input_tokens) * static_cast<double>(o.batch) / (r.first_token_ms.p50 * 1e6);
    r.weight_bytes_per_token = model->weight_bytes_per_token();
    r.peak_rss_bytes = peak_rss_bytes();
    r.kv_cache_bytes = session.cache_bytes();
    return r;
}

}  // namespace ipex::llm
