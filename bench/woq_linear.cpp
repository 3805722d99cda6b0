// int4 weight-only linear (ipex::woq_linear) against stock bf16 aten::linear on LLM-decoder
// shapes, batch 1 (decode, memory-bound) and batch 32 (prefill). Both runners get the same
// bf16 activations and are interleaved (rotating order) in one run; prints medians and
// ratio = stock median / woq median (> 1: woq is faster). Targets (issue 6): batch 1 >= 3x,
// batch 32 >= 1x. Mode "tiled" times the int4 layout LLM projections hold (lib/llm's
// Int4Decode: the decode kernel up to 8 rows, lib/woq's large-batch kernel on the same bytes
// beyond), lowp bf16; it needs AVX512-BF16. Mode "tiled-s8" the same layout with int8
// activations (lowp int8: the W4A8 VNNI kernel beyond 8 rows); it needs VNNI too.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>

#include <iomanip>
#include <iostream>
#include <sstream>

#include "bench/harness.h"
#include "timing_cli.h"
#include "checkpoint/woq_format.h"
#include "llm/int4_decode.h"
#include "ops/woq/woq_linear.h"

namespace {

struct Shape {
    int64_t k, n;
};

int run(int argc, char **argv) {
    std::vector<int64_t> batches{1, 32};
    std::vector<std::string> shapes{"4096x11008", "11008x4096"};
    std::vector<std::string> modes{"bf16"};
    ipex::bench::TimingCli timing{30, 5};
    int bits = 4;
    int64_t group_size = 128;
    bool json = false;
    CLI::App app{"int4 weight-only linear vs stock bf16 linear, interleaved medians"};
    app.add_option("--shapes", shapes, "KxN (in x out) per linear")->delimiter(',')->capture_default_str();
    app.add_option("--batches", batches, "rows of x")->delimiter(',')->capture_default_str();
    app.add_option("--modes", modes, "woq lowp modes to time: fp32, bf16, int8, tiled (int4, bf16), tiled-s8 (int4, int8)")->delimiter(',')->capture_default_str();
    app.add_option("--bits", bits, "4 or 8")->capture_default_str();
    app.add_option("--group-size", group_size, "quantization group size")->capture_default_str();
    timing.add_to(app);
    app.add_flag("--json", json, "print JSON lines");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    }
    timing.apply_threads();
    c10::InferenceMode guard;
    if (!json)
        std::cout << "threads " << at::get_num_threads() << ", int" << bits << " group " << group_size
                  << ", stock = aten::linear on bf16 weights\n";
    bool all_ok = true;
    for (const auto &spec : shapes) {
        Shape s{};
        char x = 0;
        std::istringstream(spec) >> s.k >> x >> s.n;
        at::manual_seed(0);
        const at::Tensor w = at::randn({s.n, s.k}) * 0.02;
        const ipex::woq::WoqLayer layer = ipex::woq::quantize_rtn("bench", w, at::Tensor(), bits, group_size);
        const at::Tensor w_bf16 = w.to(at::kBFloat16);
        const auto tiled = ipex::llm::Int4Decode::build(layer);
        const auto tiled_s8 = ipex::llm::Int4Decode::build(layer, /*int8_activations=*/true);
        for (const int64_t m : batches) {
            const at::Tensor input = at::randn({m, s.k}).to(at::kBFloat16);
            at::Tensor out = at::empty({m, s.n});
            for (const auto &mode : modes) {
                if ((mode == "tiled" && !tiled) || (mode == "tiled-s8" && !tiled_s8)) {
                    std::cerr << "mode " << mode << ": the layout is not built here (needs int4, AVX512-BF16"
                              << (mode == "tiled-s8" ? " and VNNI" : "") << ", a group size "
                              << "of 32, 64 or a multiple of 128 dividing K, K a multiple of 128)\n";
                    return 2;
                }
                const ipex::bench::RunFn stock = [&] { at::linear(input, w_bf16); };
                const ipex::bench::RunFn woq = [&] {
                    if (mode == "tiled")
                        tiled->run(input, out.data_ptr<float>(), s.n);
                    else if (mode == "tiled-s8")
                        tiled_s8->run(input, out.data_ptr<float>(), s.n);
                    else
                        ipex::woq::woq_linear(input, layer.qweight, layer.scales, layer.zeros, c10::nullopt,
                                              c10::nullopt, bits, layer.group_size, s.k, mode);
                };
                const auto stats = ipex::bench::time_round_robin({woq, stock}, timing.timing());
                const double ratio = stats[1].median / stats[0].median;
                const double target = m == 1 ? 3.0 : 1.0;
                all_ok &= (mode != "bf16" && mode != "tiled" && mode != "tiled-s8") || ratio >= target;
                const double gflops = 2e-6 * static_cast<double>(m * s.k * s.n) / stats[0].median;
                if (json) {
                    std::cout << nlohmann::json{{"k", s.k}, {"n", s.n}, {"batch", m}, {"mode", mode},
                                                {"woq_ms", stats[0].median}, {"stock_bf16_ms", stats[1].median},
                                                {"woq_gflops", gflops}, {"ratio", ratio}, {"target", target}}
                                     .dump()
                              << "\n";
                } else {
                    std::cout << std::fixed << std::setprecision(3) << "linear " << s.k << "->" << s.n << " batch "
                              << std::setw(2) << m << "  woq " << mode << " " << std::setw(8) << stats[0].median
                              << " ms (" << std::setprecision(1) << gflops << " GFLOP/s)" << std::setprecision(3)
                              << "   stock bf16 " << std::setw(8) << stats[1].median << " ms   ratio "
                              << std::setprecision(2) << ratio << "x (target >= " << target << "x)\n";
                }
            }
        }
    }
    return all_ok ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) { return run(argc, argv); }
