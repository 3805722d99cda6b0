#include "bench/machine_limits.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "base/cpu_features.h"
#include "base/errors.h"
#include "base/isa.h"

namespace ipex::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Repetitions each peak is the best of, after the runs that size them.
constexpr int kPeakRepetitions = 5;
constexpr int64_t kCalibrationIterations = 4096;
constexpr int64_t kMaxPeakIterations = int64_t{1} << 32;
// Share of the time budget the three peaks get together; the bandwidth gets the rest.
constexpr double kPeakBudgetShare = 0.4;
// The read buffer: kReadBufferBytes, at most a quarter of the memory available, at least
// kMinReadBufferBytes; best of kMinReadPasses..kMaxReadPasses passes.
constexpr size_t kReadBufferBytes = size_t{512} << 20;
constexpr size_t kMinReadBufferBytes = size_t{64} << 20;
constexpr int kMinReadPasses = 2;
constexpr int kMaxReadPasses = 8;
constexpr size_t kReadAlignment = 4096;

// Defeats dead-code elimination of the measured loops.
volatile double g_sink_fp = 0;
volatile uint64_t g_sink_int = 0;

// The instructions of the peaks. Each type holds its instruction's two operands and gives an
// accumulator's start value, one instruction on an accumulator, the sum of two and the total
// of one (the sink), `kOps`, the operations of one instruction, and `kChains`, the independent
// accumulators of the loop: enough to cover the instruction's latency times its ports, few
// enough to stay in registers with the two operands (16 of the 32 zmm; 12 of the 16 ymm, where
// 16 would spill and time loads and stores instead). Its functions are built for the ISA the
// instruction needs, and so is its instantiation of peak_loop (below).
struct Bf16Dot {
    using Vec = __m512;
    static constexpr double kOps = 64;  // 16 fp32 lanes x 2 bf16 pairs x (multiply + add)
    static constexpr int kChains = 16;
    __m512bh a, b;
    [[gnu::target("avx512f,avx512bf16")]] explicit Bf16Dot(float a_value)
        : a((__m512bh)_mm512_set1_epi16(static_cast<short>(0x3f80))),           // 1.0
          b((__m512bh)_mm512_castps_si512(_mm512_set1_ps(a_value * 1e-3f))) {}  // two small bf16s
    [[gnu::target("avx512f,avx512bf16")]] static Vec start(int i) { return _mm512_set1_ps(static_cast<float>(i)); }
    [[gnu::target("avx512f,avx512bf16")]] Vec step(Vec acc) const { return _mm512_dpbf16_ps(acc, a, b); }
    [[gnu::target("avx512f,avx512bf16")]] static Vec add(Vec x, Vec y) { return _mm512_add_ps(x, y); }
    [[gnu::target("avx512f,avx512bf16")]] static double total(Vec x) { return _mm512_reduce_add_ps(x); }
};

struct Fp32Fma512 {
    using Vec = __m512;
    static constexpr double kOps = 32;  // 16 lanes x (multiply + add)
    static constexpr int kChains = 16;
    __m512 a, b;
    [[gnu::target("avx512f")]] explicit Fp32Fma512(float a_value)
        : a(_mm512_set1_ps(a_value)), b(_mm512_set1_ps(1e-7f)) {}
    [[gnu::target("avx512f")]] static Vec start(int i) { return _mm512_set1_ps(static_cast<float>(i)); }
    [[gnu::target("avx512f")]] Vec step(Vec acc) const { return _mm512_fmadd_ps(a, b, acc); }
    [[gnu::target("avx512f")]] static Vec add(Vec x, Vec y) { return _mm512_add_ps(x, y); }
    [[gnu::target("avx512f")]] static double total(Vec x) { return _mm512_reduce_add_ps(x); }
};

struct Fp32Fma256 {
    using Vec = __m256;
    static constexpr double kOps = 16;  // 8 lanes x (multiply + add)
    static constexpr int kChains = 12;
    __m256 a, b;
    [[gnu::target("avx2,fma")]] explicit Fp32Fma256(float a_value)
        : a(_mm256_set1_ps(a_value)), b(_mm256_set1_ps(1e-7f)) {}
    [[gnu::target("avx2,fma")]] static Vec start(int i) { return _mm256_set1_ps(static_cast<float>(i)); }
    [[gnu::target("avx2,fma")]] Vec step(Vec acc) const { return _mm256_fmadd_ps(a, b, acc); }
    [[gnu::target("avx2,fma")]] static Vec add(Vec x, Vec y) { return _mm256_add_ps(x, y); }
    [[gnu::target("avx2,fma")]] static double total(Vec x) {
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, x);
        double total = 0;
        for (float v : lanes) total += v;
        return total;
    }
};

struct Int8Vnni {
    using Vec = __m512i;
    static constexpr double kOps = 128;  // 16 lanes x 4 u8*s8 pairs x (multiply + add)
    static constexpr int kChains = 16;
    __m512i a, b;
    [[gnu::target("avx512f,avx512vnni")]] explicit Int8Vnni(float a_value)
        : a(_mm512_set1_epi8(static_cast<char>(1 + (a_value > 2.0f)))), b(_mm512_set1_epi8(3)) {}
    [[gnu::target("avx512f,avx512vnni")]] static Vec start(int i) { return _mm512_set1_epi32(i); }
    [[gnu::target("avx512f,avx512vnni")]] Vec step(Vec acc) const { return _mm512_dpbusd_epi32(acc, a, b); }
    [[gnu::target("avx512f,avx512vnni")]] static Vec add(Vec x, Vec y) { return _mm512_add_epi32(x, y); }
    [[gnu::target("avx512f,avx512vnni")]] static double total(Vec x) {
        return static_cast<double>(_mm512_reduce_add_epi32(x));
    }
};

// `iterations` of Peak::kChains independent instructions, one per accumulator: a
// register-only loop bound by the instruction's throughput. The accumulators start from
// distinct values so that the compiler cannot merge their identical update chains into one;
// the argument keeps the operands unknown to it.
template <class Peak>
double peak_loop(int64_t iterations, float a_value) {
    const Peak peak(a_value);
    static_assert(Peak::kChains <= 16, "the unroll pragmas cover 16 accumulators");
    typename Peak::Vec acc[Peak::kChains];
#pragma GCC unroll 16
    for (int i = 0; i < Peak::kChains; ++i) acc[i] = Peak::start(i);
    for (int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
        for (int i = 0; i < Peak::kChains; ++i) acc[i] = peak.step(acc[i]);
    }
    typename Peak::Vec sum{};  // zeros
#pragma GCC unroll 16
    for (int i = 0; i < Peak::kChains; ++i) sum = Peak::add(sum, acc[i]);
    return Peak::total(sum);
}

// Each instantiation carries its instruction's ISA: GCC and clang both take a target attribute
// on an explicit instantiation (were one ignored, its intrinsics would not compile).
template __attribute__((target("avx512f,avx512bf16"))) double peak_loop<Bf16Dot>(int64_t, float);
template __attribute__((target("avx512f"))) double peak_loop<Fp32Fma512>(int64_t, float);
template __attribute__((target("avx2,fma"))) double peak_loop<Fp32Fma256>(int64_t, float);
template __attribute__((target("avx512f,avx512vnni"))) double peak_loop<Int8Vnni>(int64_t, float);

using PeakLoop = double (*)(int64_t iterations, float a_value);

// Seconds for `iterations` of `loop` on every thread at once (wall time between barriers).
double time_parallel_loop(PeakLoop loop, int threads, int64_t iterations) {
    double seconds = 0;
    double sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
        Clock::time_point start;
#pragma omp barrier
#pragma omp master
        start = Clock::now();
        sink += loop(iterations, 1.0f);
#pragma omp barrier
#pragma omp master
        seconds = std::chrono::duration<double>(Clock::now() - start).count();
    }
    g_sink_fp = sink;
    return seconds;
}

// Giga-operations per second: the best of kPeakRepetitions runs sized to share `budget_s`.
// The size comes from the best rate seen while doubling a run until it would take half a
// repetition's share at that rate: a run only ever looks slower than the loop is (a thread's
// wake-up, a preemption), so the best rate is the estimate to trust, and a stall in one short
// run cannot leave the repetitions too short to time.
double measure_peak(PeakLoop loop, double ops_per_iteration, int threads, double budget_s) {
    const double per_run = budget_s / (kPeakRepetitions + 1);
    int64_t iterations = kCalibrationIterations;
    double best_rate = 0;  // iterations per second
    for (;;) {
        const double s = time_parallel_loop(loop, threads, iterations);
        if (s > 0) best_rate = std::max(best_rate, static_cast<double>(iterations) / s);
        if (iterations >= kMaxPeakIterations || static_cast<double>(iterations) >= best_rate * per_run / 2) break;
        iterations *= 2;
    }
    iterations = std::clamp<int64_t>(static_cast<int64_t>(best_rate * per_run), kCalibrationIterations,
                                     kMaxPeakIterations);
    double best = 0;
    for (int r = 0; r < kPeakRepetitions; ++r) {
        const double s = time_parallel_loop(loop, threads, iterations);
        if (s > 0) best = std::max(best, static_cast<double>(iterations) / s);
    }
    return std::max(best, best_rate) * ops_per_iteration * threads / 1e9;
}

template <class Peak>
double measure_peak_of(int threads, double budget_s) {
    return measure_peak(&peak_loop<Peak>, Peak::kOps * Peak::kChains, threads, budget_s);
}

// Each thread reads its slice as kReadStreams sub-slices walked side by side, 256 bytes of each in
// turn: one sequential stream per core left this EPYC's read bandwidth at 26 GB/s on 2 cores,
// four streams reached 38 GB/s (the most an elementwise op over several tensors sees).
constexpr size_t kReadStreams = 4;
constexpr size_t kStreamStep = 32;  // words of one sub-slice per turn (256 bytes)

// 256-bit loads on every CPU with AVX2, AVX-512 ones included: two cores read at most ~25 bytes
// a cycle between them, and one core loads 64 a cycle at this width.
__attribute__((target("avx2"))) uint64_t sum_avx2(const uint64_t *src, size_t n) {
    const size_t part = n / kReadStreams / kStreamStep * kStreamStep;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < part; i += kStreamStep)
        for (size_t s = 0; s < kReadStreams; ++s) {
            const uint64_t *q = src + s * part + i;
            for (size_t j = 0; j < kStreamStep; j += 16) {
                a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i *>(q + j)));
                a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i *>(q + j + 4)));
                a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i *>(q + j + 8)));
                a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i *>(q + j + 12)));
            }
        }
    alignas(32) uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i *>(lanes),
                       _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
    uint64_t total = lanes[0] + lanes[1] + lanes[2] + lanes[3];
    for (size_t i = part * kReadStreams; i < n; ++i) total += src[i];
    return total;
}

uint64_t sum_scalar(const uint64_t *src, size_t n) {
    uint64_t total = 0;
    for (size_t i = 0; i < n; ++i) total += src[i];
    return total;
}

// MemAvailable from /proc/meminfo in bytes; 0 when unknown.
size_t available_memory() {
    std::ifstream f("/proc/meminfo");
    std::string key;
    size_t kib = 0;
    std::string unit;
    while (f >> key >> kib >> unit)
        if (key == "MemAvailable:") return kib * 1024;
    return 0;
}

struct FreeDeleter {
    void operator()(uint64_t *p) const { std::free(p); }
};

// GB/s of the best pass over a buffer read by `threads` threads, each its own slice (which
// it also wrote first, so its pages sit on its NUMA node).
double measure_read_bandwidth(int threads, double budget_s, double *buffer_mib) {
    const size_t available = available_memory();
    size_t bytes = kReadBufferBytes;
    if (available > 0) bytes = std::min(bytes, available / 4);
    bytes = std::max(bytes, kMinReadBufferBytes) / kReadAlignment * kReadAlignment;
    std::unique_ptr<uint64_t, FreeDeleter> buffer(static_cast<uint64_t *>(std::aligned_alloc(kReadAlignment, bytes)));
    if (!buffer) return 0;
    *buffer_mib = static_cast<double>(bytes) / (1 << 20);
    const size_t words = bytes / sizeof(uint64_t);
    const size_t slice = words / static_cast<size_t>(threads) / 64 * 64;  // whole cache lines
    uint64_t *data = buffer.get();
    auto sum = &sum_scalar;
    if (cpu_features().avx2) sum = &sum_avx2;

#pragma omp parallel num_threads(threads)
    {
        const size_t t = static_cast<size_t>(omp_get_thread_num());
        std::fill(data + t * slice, data + (t + 1) * slice, uint64_t{t + 1});
    }
    const auto start = Clock::now();
    double best = 0;
    for (int pass = 0; pass < kMaxReadPasses; ++pass) {
        double seconds = 0;
        uint64_t total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
        {
            const size_t t = static_cast<size_t>(omp_get_thread_num());
            Clock::time_point pass_start;
#pragma omp barrier
#pragma omp master
            pass_start = Clock::now();
            total += sum(data + t * slice, slice);
#pragma omp barrier
#pragma omp master
            seconds = std::chrono::duration<double>(Clock::now() - pass_start).count();
        }
        g_sink_int = total;
        if (seconds > 0) best = std::max(best, static_cast<double>(slice * threads * sizeof(uint64_t)) / seconds / 1e9);
        const double spent = std::chrono::duration<double>(Clock::now() - start).count();
        if (pass + 1 >= kMinReadPasses && spent * (pass + 2) / (pass + 1) > budget_s) break;
    }
    return best;
}

}  // namespace

std::string peak_text(double value, const char *unit, const char *missing_isa) {
    char text[64];
    if (value > 0) std::snprintf(text, sizeof text, "%.1f %s", value, unit);
    else if (missing_isa) std::snprintf(text, sizeof text, "absent (no %s)", missing_isa);
    else std::snprintf(text, sizeof text, "absent");
    return text;
}

nlohmann::json MachineLimits::to_json() const {
    auto peak = [](double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
    return {{"threads", threads},
            {"bf16_dot_gflops", peak(bf16_dot_gflops)},
            {"fp32_fma_gflops", peak(fp32_fma_gflops)},
            {"int8_vnni_gops", peak(int8_vnni_gops)},
            {"read_gbs", peak(read_gbs)},
            {"read_buffer_mib", read_buffer_mib},
            {"seconds", seconds}};
}

double MachineLimits::peak_for(const std::string &dtype) const {
    if (dtype == "bf16" || dtype == "bf32") return bf16_dot_gflops;
    if (dtype == "fp32") return fp32_fma_gflops;
    if (dtype == "int8") return int8_vnni_gops;
    return 0;
}

MachineLimits best_of(const MachineLimits &a, const MachineLimits &b) {
    MachineLimits m = a;
    m.bf16_dot_gflops = std::max(a.bf16_dot_gflops, b.bf16_dot_gflops);
    m.fp32_fma_gflops = std::max(a.fp32_fma_gflops, b.fp32_fma_gflops);
    m.int8_vnni_gops = std::max(a.int8_vnni_gops, b.int8_vnni_gops);
    m.read_gbs = std::max(a.read_gbs, b.read_gbs);
    m.seconds = a.seconds + b.seconds;
    return m;
}

MachineLimits measure_machine_limits(int threads, double seconds_budget) {
    if (threads < 1) throw_usage("machine limits need at least one thread, got " + std::to_string(threads));
    const auto start = Clock::now();
    const CpuFeatures &cpu = cpu_features();
    MachineLimits m;
#pragma omp parallel num_threads(threads)
    {
#pragma omp master
        m.threads = omp_get_num_threads();  // what the runtime granted (OMP_THREAD_LIMIT may cap it)
    }
    threads = m.threads;
    const double peak_budget = seconds_budget * kPeakBudgetShare / 3;
    // fp32 first: it also brings the cores up to their AVX-512 clocks.
    if (cpu.avx512f) {
        m.fp32_fma_gflops = measure_peak_of<Fp32Fma512>(threads, peak_budget);
    } else if (cpu.avx2 && isa::avx2_fma()) {
        m.fp32_fma_gflops = measure_peak_of<Fp32Fma256>(threads, peak_budget);
    }
    if (cpu.avx512_bf16) m.bf16_dot_gflops = measure_peak_of<Bf16Dot>(threads, peak_budget);
    if (cpu.avx512_vnni) m.int8_vnni_gops = measure_peak_of<Int8Vnni>(threads, peak_budget);
    const double spent = std::chrono::duration<double>(Clock::now() - start).count();
    m.read_gbs = measure_read_bandwidth(threads, std::max(seconds_budget - spent, 0.1), &m.read_buffer_mib);
    m.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return m;
}

}  // namespace ipex::bench
