#include "llm/generate.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "base/errors.h"
#include "base/log.h"

namespace ipex::llm {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

int64_t cache_elem_bytes(const Model &model) { return model.cache_type() == kernels::CacheType::f32 ? 4 : 2; }

std::string non_finite_warning(int64_t step, int64_t position) {
    return "non-finite logits at step " + std::to_string(step) + " (position " + std::to_string(position) +
           "): the checkpoint's weights or the model's arithmetic produced NaN/Inf; the output is not meaningful";
}

std::string long_context_warning(const ModelConfig &config, int64_t positions) {
    return "--allow-long-context: running " + std::to_string(positions) + " positions, past what the model declares (" +
           config.position_limit_source + "); its output there may not be meaningful";
}

}  // namespace

void check_generate_options(const GenerateOptions &o) {
    check_count("--max-new-tokens", o.max_new_tokens, counts::max_new_tokens);
    if (o.max_length != 0) check_count("--max-length", o.max_length, counts::max_length);
    check_sampling(o.sampling);
}

int64_t check_generate(const ModelConfig &c, const std::vector<std::vector<int32_t>> &prompts,
                       const GenerateOptions &o, int64_t cache_elem_bytes) {
    if (prompts.empty()) throw_usage("no prompt given");
    const int64_t batch = static_cast<int64_t>(prompts.size());
    check_count("the number of prompts (--prompt, --prompt-file, --prompt-ids and --batch-file lines)", batch,
                counts::prompts);
    check_generate_options(o);
    int64_t longest = 0, longest_at = 0, total = 0;
    for (size_t b = 0; b < prompts.size(); ++b) {
        const int64_t len = static_cast<int64_t>(prompts[b].size());
        if (len == 0) throw_usage("prompt " + std::to_string(b + 1) + " has no tokens");
        for (int32_t id : prompts[b])
            if (id < 0 || id >= c.vocab_size)
                throw_usage("prompt " + std::to_string(b + 1) + ": token id " + std::to_string(id) +
                            " is outside the model's vocabulary [0, " + std::to_string(c.vocab_size) +
                            ") (config.json vocab_size; check --prompt-ids)");
        total += len;
        if (len > longest) {
            longest = len;
            longest_at = static_cast<int64_t>(b);
        }
    }
    if (o.max_length > 0 && longest > o.max_length)
        throw_usage("a prompt has " + std::to_string(longest) + " tokens, longer than --max-length " +
                    std::to_string(o.max_length));
    // The cache holds what the run can use, never more: --max-length caps it.
    const int64_t wanted = longest + o.max_new_tokens;
    const bool capped = o.max_length > 0 && o.max_length < wanted;
    const int64_t positions = capped ? o.max_length : wanted;
    const std::string prompt = batch == 1 ? "prompt (" : "prompt " + std::to_string(longest_at + 1) + " (";
    const std::string asked = capped ? "--max-length " + std::to_string(o.max_length)
                                     : prompt + std::to_string(longest) + " tokens) + --max-new-tokens " +
                                           std::to_string(o.max_new_tokens);
    check_positions(c, positions, asked, o.allow_long_context);
    if (o.max_new_tokens > 0)
        check_run_memory(c, {batch, positions, total, batch}, cache_elem_bytes,
                         std::to_string(batch) + (batch == 1 ? " sequence" : " sequences") + " of " +
                             std::to_string(positions) + " positions");
    return positions;
}

GenerateResult generate(std::shared_ptr<const Model> model, const Tokenizer *tokenizer,
                        const std::vector<std::vector<int32_t>> &prompts, const GenerateOptions &options,
                        const std::function<void(int64_t, const std::string &)> &on_text) {
    const ModelConfig &config = model->config();
    const int64_t max_length = check_generate(config, prompts, options, cache_elem_bytes(*model));
    const int64_t batch = static_cast<int64_t>(prompts.size());
    const int64_t vocab = config.vocab_size;
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
    // The next token of sequence b from its logits at generation step `step`; NaN/Inf logits
    // stop the sequence instead (no token means anything then), said once per run.
    const auto pick = [&](int64_t b, const float *logits, int64_t step) {
        const size_t i = static_cast<size_t>(b);
        if (options.on_logits) options.on_logits(b, step, logits);
        const int32_t id = samplers[i].next(logits, history[i]);
        if (id != kNoToken) return emit(b, id);
        done[i] = true;
        r.stop_reason[i] = "non_finite";
        if (r.non_finite.sequence >= 0) return;
        r.non_finite = {b, step, static_cast<int64_t>(history[i].size()) - 1};
        log::warn(non_finite_warning(r.non_finite.step, r.non_finite.position) +
                  (batch > 1 ? "; sequence " + std::to_string(b + 1) + " stops there" : "; generation stops there") +
                  " (stop reason \"non_finite\")");
    };

    const auto t0 = Clock::now();
    if (options.max_new_tokens == 0) return r;
    if (max_length > config.position_limit) log::warn(long_context_warning(config, max_length));
    Session session(model, batch, max_length, options.allow_long_context);
    Logits logits = session.prefill(prompts);
    int64_t step = 1;
    for (int64_t b = 0; b < batch; ++b) pick(b, logits.row(b), step);
    r.prefill_ms = ms_since(t0);
    std::vector<int32_t> next(static_cast<size_t>(batch));
    while (std::find(done.begin(), done.end(), false) != done.end()) {
        const auto t1 = Clock::now();
        for (int64_t b = 0; b < batch; ++b) next[static_cast<size_t>(b)] = history[static_cast<size_t>(b)].back();
        // Finished sequences ride along (their positions are spare) until all are done.
        bool room = true;
        for (int64_t b = 0; b < batch; ++b) room = room && session.length(b) < max_length;
        if (!room) {
            for (int64_t b = 0; b < batch; ++b) done[static_cast<size_t>(b)] = true;
            break;
        }
        logits = session.decode(next);
        ++step;
        for (int64_t b = 0; b < batch; ++b)
            if (!done[static_cast<size_t>(b)]) pick(b, logits.row(b), step);
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

int64_t default_context(const ModelConfig &config) {
    return std::max<int64_t>(counts::context.lo, std::min(kDefaultContext, config.position_limit));
}

void check_perplexity(const ModelConfig &config, int64_t context, int64_t stride, bool allow_long_context) {
    check_count("--context", context, counts::context);
    check_count("--stride", stride, counts::stride);
    if (stride > context)
        throw_usage("--stride " + std::to_string(stride) + " is larger than --context " + std::to_string(context) +
                    ": the tokens between windows would not be scored (give a stride <= the context)");
    check_positions(config, context, "--context " + std::to_string(context), allow_long_context);
}

PerplexityResult perplexity(std::shared_ptr<const Model> model, const std::vector<int32_t> &ids, int64_t context,
                            int64_t stride, bool allow_long_context) {
    const ModelConfig &config = model->config();
    check_perplexity(config, context, stride, allow_long_context);
    const int64_t n = static_cast<int64_t>(ids.size());
    if (n < 2) throw_bad_input("the text has fewer than 2 tokens; nothing to score");
    const int64_t window_max = std::min(context, n);
    check_run_memory(config, {1, window_max, window_max, window_max}, cache_elem_bytes(*model),
                     "--context " + std::to_string(context));
    if (window_max > config.position_limit) log::warn(long_context_warning(config, window_max));
    PerplexityResult r;
    r.tokens = n;
    const auto t0 = Clock::now();
    Session session(model, 1, window_max, allow_long_context);
    int64_t scored_until = 1;  // the first token has no prediction
    for (int64_t begin = 0; scored_until < n && r.finite; begin += stride) {
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
            const double loss = std::log(sum) + m - row[ids[static_cast<size_t>(t)]];
            if (!std::isfinite(loss)) {  // NaN/Inf logits: nothing after this means anything
                r.finite = false;
                r.non_finite_position = t;
                log::warn("non-finite loss at token " + std::to_string(t) + " of the text (window " +
                          std::to_string(r.windows + 1) + ", logits of position " + std::to_string(t - 1 - begin) +
                          "): the checkpoint's weights or the model's arithmetic produced NaN/Inf; the "
                          "perplexity is not meaningful");
                break;
            }
            r.nll += loss;
            ++r.scored;
        }
        scored_until = std::max(scored_until, end);
        ++r.windows;
        if (end == n) break;
    }
    r.perplexity = r.finite ? std::exp(r.nll / static_cast<double>(r.scored)) : std::nan("");
    if (r.finite && !std::isfinite(r.perplexity)) {
        r.finite = false;
        log::warn("the perplexity overflows: the mean negative log-likelihood is " +
                  std::to_string(r.nll / static_cast<double>(r.scored)) + " over " + std::to_string(r.scored) +
                  " tokens; the perplexity is not meaningful");
    }
    r.seconds = ms_since(t0) / 1000.0;
    return r;
}

LatencyStats latency_stats(std::vector<double> ms) {
    const ipex::LatencyStats all = summarize(std::move(ms), {50, 90, 99});
    LatencyStats s;
    if (all.samples == 0) return s;
    s.mean = all.mean;
    s.p50 = all.percentiles.at(50);
    s.p90 = all.percentiles.at(90);
    s.p99 = all.percentiles.at(99);
    s.min = all.min;
    return s;
}

void check_bench_llm(const ModelConfig &config, const LlmBenchOptions &o, int64_t cache_elem_bytes) {
    check_count("--input-tokens", o.input_tokens, counts::input_tokens);
    check_count("--output-tokens", o.output_tokens, counts::output_tokens);
    check_count("--batch", o.batch, counts::batch);
    check_count("--iterations", o.iterations, counts::iterations);
    check_count("the warm-up iterations", o.warmup, {0, kMaxIterations});
    const std::string asked =
        "--input-tokens " + std::to_string(o.input_tokens) + " + --output-tokens " + std::to_string(o.output_tokens);
    const int64_t positions = o.input_tokens + o.output_tokens;
    check_positions(config, positions, asked, o.allow_long_context);
    check_run_memory(config, {o.batch, positions, o.batch * o.input_tokens, o.batch}, cache_elem_bytes,
                     asked + " with --batch " + std::to_string(o.batch));
}

LlmBenchResult bench_llm(std::shared_ptr<const Model> model, const LlmBenchOptions &o) {
    const ModelConfig &config = model->config();
    check_bench_llm(config, o, cache_elem_bytes(*model));
    const int64_t positions = o.input_tokens + o.output_tokens;
    if (positions > config.position_limit) log::warn(long_context_warning(config, positions));
    Session session(model, o.batch, positions, o.allow_long_context);
    const int64_t vocab = config.vocab_size;
    std::mt19937_64 rng(o.seed);
    std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(std::min<int64_t>(vocab, 1 << 30) - 1));
    std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(o.batch));
    for (auto &p : prompts)
        for (int64_t i = 0; i < o.input_tokens; ++i) p.push_back(pick(rng));
    LlmBenchResult r;
    // The first run's logits are checked for NaN/Inf (every run computes the same ones), the
    // time that takes kept out of the figures.
    double checking_ms = 0;
    const auto check = [&](const Logits &logits, int64_t step) {
        const auto t = Clock::now();
        if (!r.non_finite_logits && !all_finite(logits.data, logits.rows * logits.vocab)) {
            r.non_finite_logits = true;
            log::warn(non_finite_warning(step, o.input_tokens - 1 + step - 1) + " (the timings stand)");
        }
        checking_ms += ms_since(t);
    };
    std::vector<double> first, next;
    double generated_ms = 0;
    std::vector<int32_t> step(static_cast<size_t>(o.batch));
    for (int64_t it = 0; it < o.warmup + o.iterations; ++it) {
        session.reset();
        const bool timed = it >= o.warmup, checked = it == 0;
        checking_ms = 0;
        const auto t0 = Clock::now();
        Logits logits = session.prefill(prompts);
        if (checked) check(logits, 1);
        for (int64_t b = 0; b < o.batch; ++b) step[static_cast<size_t>(b)] = argmax(logits.row(b), logits.vocab);
        const double f = ms_since(t0) - checking_ms;
        if (timed) first.push_back(f);
        for (int64_t k = 1; k < o.output_tokens; ++k) {
            const auto t1 = Clock::now();
            const double checked_before = checking_ms;
            logits = session.decode(step);
            if (checked) check(logits, k + 1);
            for (int64_t b = 0; b < o.batch; ++b) step[static_cast<size_t>(b)] = argmax(logits.row(b), logits.vocab);
            if (timed) next.push_back(ms_since(t1) - (checking_ms - checked_before));
        }
        if (timed) generated_ms += ms_since(t0) - checking_ms;
    }
    r.first_token_ms = latency_stats(first);
    r.next_token_ms = latency_stats(next);
    r.tokens_per_second = static_cast<double>(o.batch * o.output_tokens * o.iterations) / (generated_ms / 1000.0);
    r.prefill_gflops = model->prefill_flops(o.input_tokens) * static_cast<double>(o.batch) / (r.first_token_ms.p50 * 1e6);
    r.weight_bytes_per_token = model->weight_bytes_per_token();
    r.peak_rss_bytes = peak_rss_bytes();
    r.resident_weight_bytes = model->resident_weight_bytes();
    r.kv_cache_bytes = session.cache_bytes();
    return r;
}

}  // namespace ipex::llm
