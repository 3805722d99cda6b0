#include "bench/profile.h"

#include "base/text.h"

#include <ATen/core/function_schema.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <map>
#include <memory>
#include <sstream>
#include <tuple>
#include <utility>

#include "base/errors.h"

namespace ipex::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

struct Recorder {
    std::map<std::tuple<std::string, std::string, OpKind, std::string>, ProfileRow> rows;  // (op, dtype, kind, layer)
    bool by_layer = false;
    int depth = 0;
    double callback_ms = 0;  // callbacks' time outside the top-level ops' intervals
};

// The recorder of the profile running on this thread (RecordFunction callbacks are plain
// function pointers; they find their state here).
thread_local Recorder *t_recorder = nullptr;

struct OpContext : at::ObserverContext {
    bool top = false;
    std::string op;
    OpWork work;
    std::string layer;
    Clock::time_point start;
};

// The op's own arguments: a boxed call (the TorchScript interpreter's) hands RecordFunction its
// whole stack, whose last values are the arguments.
c10::ArrayRef<const c10::IValue> op_arguments(const at::RecordFunction &fn) {
    const c10::ArrayRef<const c10::IValue> inputs = fn.inputs();
    const auto schema = fn.operator_schema();
    if (!schema) return inputs;
    const size_t n = schema->arguments().size();
    return n <= inputs.size() ? inputs.slice(inputs.size() - n) : inputs;
}

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction &fn) {
    Recorder *r = t_recorder;
    if (!r) return nullptr;
    auto ctx = std::make_unique<OpContext>();
    ctx->top = r->depth++ == 0;
    if (!ctx->top) return ctx;
    const auto entered = Clock::now();
    ctx->op = fn.name();
    try {
        ctx->work = op_work(ctx->op, op_arguments(fn));
    } catch (const std::exception &) {
        ctx->work = OpWork{op_kind(ctx->op), "", 0};  // inputs this op's schema does not promise
    }
    if (r->by_layer) ctx->layer = op_signature(ctx->op, op_arguments(fn));
    ctx->start = Clock::now();
    r->callback_ms += ms_between(entered, ctx->start);
    return ctx;
}

void on_op_end(const at::RecordFunction &, at::ObserverContext *observer) {
    const auto end = Clock::now();
    Recorder *r = t_recorder;
    if (!r || !observer) return;
    --r->depth;
    auto *ctx = static_cast<OpContext *>(observer);
    if (!ctx->top) return;
    // Compute ops get a row per dtype (each has its own peak); other ops one row per name.
    const bool compute = ctx->work.kind != OpKind::kOther;
    // (ipex::int8_op is a convolution or a linear, as its context says.)
    ProfileRow &row = r->rows[{ctx->op, compute ? ctx->work.dtype : std::string(), ctx->work.kind, ctx->layer}];
    if (row.calls == 0) {
        row.op = ctx->op;
        row.layer = ctx->layer;
        row.dtype = ctx->work.dtype;
        row.kind = ctx->work.kind;
    } else if (row.dtype != ctx->work.dtype) {
        row.dtype = kMixedDtypes;
    }
    ++row.calls;
    row.total_ms += ms_between(ctx->start, end);
    row.flops += ctx->work.flops;
    r->callback_ms += ms_between(end, Clock::now());
}

// Removes the callback and the recorder whatever way the profiled runs end.
class CallbackScope {
public:
    explicit CallbackScope(Recorder *recorder) {
        t_recorder = recorder;
        handle_ = at::addThreadLocalCallback(at::RecordFunctionCallback(&on_op_start, &on_op_end)
                                                 .needsInputs(true)
                                                 .scopes({at::RecordScope::FUNCTION}));
    }
    ~CallbackScope() {
        at::removeCallback(handle_);
        t_recorder = nullptr;
    }
    CallbackScope(const CallbackScope &) = delete;
    CallbackScope &operator=(const CallbackScope &) = delete;

private:
    at::CallbackHandle handle_;
};

bool is_compute(OpKind kind) { return kind != OpKind::kOther; }


// GFLOP/s of `flops` in `ms`.
double gflops_per_s(int64_t flops, double ms) { return ms > 0 ? static_cast<double>(flops) / (ms * 1e6) : 0; }

}  // namespace

double Profile::compute_ms() const {
    double ms = 0;
    for (const auto &r : rows)
        if (is_compute(r.kind)) ms += r.total_ms;
    return ms;
}

bool Profile::exceeds_peak(const MachineLimits &limits) const {
    for (const auto &r : rows) {
        const double peak = limits.peak_for(r.dtype);
        if (is_compute(r.kind) && peak > 0 && gflops_per_s(r.flops, r.total_ms) > peak) return true;
    }
    return false;
}

int64_t Profile::compute_flops() const {
    int64_t flops = 0;
    for (const auto &r : rows)
        if (is_compute(r.kind)) flops += r.flops;
    return flops;
}

Profile profile_runs(const RunFn &run, int iterations, bool by_layer) {
    if (iterations < 1) throw_usage("--profile needs at least one iteration");
    Recorder recorder;
    recorder.by_layer = by_layer;
    Profile p;
    p.iterations = iterations;
    p.by_layer = by_layer;
    double wall_ms = 0;
    {
        CallbackScope scope(&recorder);
        for (int i = 0; i < iterations; ++i) {
            const auto start = Clock::now();
            run();
            wall_ms += ms_between(start, Clock::now());
        }
    }
    p.callback_ms = recorder.callback_ms;
    p.forward_ms = std::max(wall_ms - recorder.callback_ms, 0.0);
    double in_ops = 0;
    for (auto &[key, row] : recorder.rows) {
        in_ops += row.total_ms;
        p.rows.push_back(std::move(row));
    }
    ProfileRow between;
    between.op = kBetweenOps;
    between.calls = iterations;
    between.total_ms = std::max(p.forward_ms - in_ops, 0.0);
    p.forward_ms = std::max(p.forward_ms, in_ops);
    p.rows.push_back(between);
    std::stable_sort(p.rows.begin(), p.rows.end(),
                     [](const ProfileRow &a, const ProfileRow &b) { return a.total_ms > b.total_ms; });
    return p;
}

nlohmann::json Profile::to_json(const MachineLimits &limits) const {
    const double n = iterations > 0 ? iterations : 1;
    const double forward = forward_ms > 0 ? forward_ms : 1;
    nlohmann::json rows_json = nlohmann::json::array();
    for (const auto &r : rows) {
        nlohmann::json j = {{"op", r.op},
                            {"kind", op_kind_name(r.kind)},
                            {"dtype", r.dtype},
                            {"layer", by_layer ? nlohmann::json(r.layer) : nlohmann::json(nullptr)},
                            {"calls", r.calls},
                            {"calls_per_iteration", static_cast<double>(r.calls) / n},
                            {"total_ms", r.total_ms},
                            {"ms_per_iteration", r.total_ms / n},
                            {"share", r.total_ms / forward},
                            {"flops_per_iteration", nullptr},
                            {"gflops_per_s", nullptr},
                            {"peak_gflops", nullptr},
                            {"share_of_peak", nullptr}};
        if (is_compute(r.kind)) {
            j["flops_per_iteration"] = r.flops / iterations;
            const double rate = gflops_per_s(r.flops, r.total_ms);
            j["gflops_per_s"] = rate;
            const double peak = limits.peak_for(r.dtype);
            if (peak > 0) {
                j["peak_gflops"] = peak;
                j["share_of_peak"] = rate / peak;
            }
        }
        rows_json.push_back(std::move(j));
    }
    const double compute = compute_ms();
    return {{"iterations", iterations},
            {"by_layer", by_layer},
            {"forward_ms", forward_ms / n},
            {"unprofiled_median_ms", unprofiled_median_ms > 0 ? nlohmann::json(unprofiled_median_ms) : nlohmann::json(nullptr)},
            {"callback_ms", callback_ms / n},
            {"rows", rows_json},
            {"totals",
             {{"compute_ms", compute / n},
              {"compute_share", compute / forward},
              {"outside_ms", (forward_ms - compute) / n},
              {"outside_share", (forward_ms - compute) / forward},
              {"compute_flops_per_iteration", compute_flops() / iterations},
              {"compute_gflops_per_s", gflops_per_s(compute_flops(), compute)}}}};
}

std::string Profile::table(const MachineLimits &limits) const {
    const double n = iterations > 0 ? iterations : 1;
    const double forward = forward_ms > 0 ? forward_ms : 1;
    // An op whose name does not say its kind (ipex::int8_op) shows it: "ipex::int8_op (conv)".
    auto label = [this](const ProfileRow &r) {
        std::string s = is_compute(r.kind) && op_kind(r.op) != r.kind ? r.op + " (" + op_kind_name(r.kind) + ")" : r.op;
        if (by_layer && !r.layer.empty()) s += " " + r.layer;
        return s;
    };
    size_t width = 24;
    for (const auto &r : rows) width = std::max(width, label(r).size() + 2);
    std::ostringstream out;
    out << std::left << std::setw(static_cast<int>(width)) << "op" << std::setw(7) << "dtype" << std::right
        << std::setw(7) << "calls" << std::setw(10) << "ms" << std::setw(8) << "share" << std::setw(10) << "MFLOP"
        << std::setw(10) << "GFLOP/s" << std::setw(8) << "% peak" << "\n";
    for (const auto &r : rows) {
        out << std::left << std::setw(static_cast<int>(width)) << label(r) << std::setw(7) << (r.dtype.empty() ? "-" : r.dtype)
            << std::right << std::setw(7) << (r.op == kBetweenOps ? std::string("-") : fixed_text(r.calls / n, r.calls % iterations ? 1 : 0))
            << std::setw(10) << fixed_text(r.total_ms / n, 3) << std::setw(7) << fixed_text(100 * r.total_ms / forward, 1) << "%";
        if (is_compute(r.kind)) {
            const double rate = gflops_per_s(r.flops, r.total_ms);
            const double peak = limits.peak_for(r.dtype);
            out << std::setw(10) << fixed_text(static_cast<double>(r.flops) / n / 1e6, 1) << std::setw(10) << fixed_text(rate, 1)
                << std::setw(8) << (peak > 0 ? fixed_text(100 * rate / peak, 1) + "%" : std::string("-"));
        } else {
            out << std::setw(10) << "-" << std::setw(10) << "-" << std::setw(8) << "-";
        }
        out << "\n";
    }
    const double compute = compute_ms();
    out << "conv/linear/matmul/attention/rnn: " << fixed_text(compute / n, 3) << " ms (" << fixed_text(100 * compute / forward, 1)
        << "%), " << fixed_text(static_cast<double>(compute_flops()) / n / 1e6, 1) << " MFLOP, "
        << fixed_text(gflops_per_s(compute_flops(), compute), 1) << " GFLOP/s\n";
    out << "outside conv/linear/matmul/attention: " << fixed_text((forward_ms - compute) / n, 3) << " ms ("
        << fixed_text(100 * (forward_ms - compute) / forward, 1) << "%)\n";
    return out.str();
}

}  // namespace ipex::bench
