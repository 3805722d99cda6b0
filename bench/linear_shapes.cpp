// fp32 linear (y = x W^T + b) on given shapes under several implementations, interleaved in
// one run: ipex::linear's context ("ctx", what optimized models run), oneDNN matmul with the
// weight layout oneDNN picks ("mm_any"), the plain [out, in] weight read transposed
// ("mm_ba"), oneDNN inner product ("ip_any") and aten::linear ("aten"). Prints median ms,
// GFLOP/s and the share of the fp32 FMA peak measured in the same process.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>

#include <iomanip>
#include <iostream>
#include <sstream>

#include "bench/harness.h"
#include "bench/machine_limits.h"
#include "timing_cli.h"
#include "ops/linear_context.h"
#include "ops/onednn_utils.h"

namespace {

using dnnl::memory;

struct Shape {
    int64_t m, k, n;
};

// A oneDNN primitive with its operands, run with the calling thread's stream.
struct Prim {
    dnnl::primitive primitive;
    memory::desc scratchpad;
    std::unordered_map<int, memory> args;
    at::Tensor packed;  // owns a reordered weight
    std::string impl;
    void operator()() const { ipex::ops::execute(primitive, scratchpad, args); }
};

memory::desc plain_desc(int64_t rows, int64_t cols) {
    return memory::desc({rows, cols}, memory::data_type::f32, memory::format_tag::ab);
}

// `weight` [n, k] reordered into `desc` (a fresh buffer) unless it already is that layout.
memory weight_memory(const at::Tensor &weight, const memory::desc &desc, const memory::desc &plain, at::Tensor &owner) {
    if (desc == plain) return ipex::ops::wrap(weight, plain);
    owner = at::empty({static_cast<int64_t>(desc.get_size() / sizeof(float))});
    memory dst = ipex::ops::wrap(owner, desc);
    memory src = ipex::ops::wrap(weight, plain);
    dnnl::reorder(src, dst).execute(ipex::ops::thread_stream(), src, dst);
    ipex::ops::thread_stream().wait();
    return dst;
}

// `tag` undef: the plain weight read in place (ba); `pad` > 0: ab with rows `pad` floats longer.
Prim make_matmul(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &bias, const at::Tensor &y,
                 memory::format_tag tag, int64_t pad = 0) {
    const int64_t m = x.size(0), k = x.size(1), n = weight.size(0);
    // The plain [n, k] weight seen as [k, n]: strides {1, k}.
    const memory::desc plain({k, n}, memory::data_type::f32, memory::dims{1, k});
    const memory::desc wmd = pad > 0 ? memory::desc({k, n}, memory::data_type::f32, memory::dims{n + pad, 1})
                             : tag == memory::format_tag::undef ? plain
                                                                : memory::desc({k, n}, memory::data_type::f32, tag);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::primitive_desc pd(
        dnnl::matmul::desc(plain_desc(m, k), wmd, plain_desc(1, n), plain_desc(m, n)), attr, ipex::ops::cpu_engine());
    Prim p;
    p.primitive = dnnl::matmul(pd);
    p.scratchpad = pd.scratchpad_desc();
    p.impl = pd.impl_info_str();
    p.args = {{DNNL_ARG_SRC, ipex::ops::wrap(x, plain_desc(m, k))},
              {DNNL_ARG_WEIGHTS, weight_memory(weight, pd.weights_desc(), plain, p.packed)},
              {DNNL_ARG_BIAS, ipex::ops::wrap(bias, plain_desc(1, n))},
              {DNNL_ARG_DST, ipex::ops::wrap(y, plain_desc(m, n))}};
    return p;
}

Prim make_inner_product(const at::Tensor &x, const at::Tensor &weight, const at::Tensor &bias, const at::Tensor &y) {
    const int64_t m = x.size(0), k = x.size(1), n = weight.size(0);
    const memory::desc any({n, k}, memory::data_type::f32, memory::format_tag::any);
    const memory::desc bmd({n}, memory::data_type::f32, memory::format_tag::a);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::inner_product_forward::primitive_desc pd(
        dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, plain_desc(m, k), any, bmd,
                                          plain_desc(m, n)),
        attr, ipex::ops::cpu_engine());
    Prim p;
    p.primitive = dnnl::inner_product_forward(pd);
    p.scratchpad = pd.scratchpad_desc();
    p.impl = pd.impl_info_str();
    p.args = {{DNNL_ARG_SRC, ipex::ops::wrap(x, plain_desc(m, k))},
              {DNNL_ARG_WEIGHTS, weight_memory(weight, pd.weights_desc(), plain_desc(n, k), p.packed)},
              {DNNL_ARG_BIAS, ipex::ops::wrap(bias, bmd)},
              {DNNL_ARG_DST, ipex::ops::wrap(y, plain_desc(m, n))}};
    return p;
}

int run(int argc, char **argv) {
    std::vector<std::string> shapes{"150x12544x1024"};
    std::vector<std::string> variants{"ctx", "mm_any", "mm_ba", "ip_any", "aten"};
    ipex::bench::TimingCli timing{20, 3};
    CLI::App app{"fp32 linear shapes under several implementations, interleaved medians"};
    app.add_option("--shapes", shapes, "MxKxN (rows x in x out) per linear")->delimiter(',')->capture_default_str();
    app.add_option("--variants", variants, "ctx, mm_any, mm_ab, mm_abpad (rows 16 floats longer), mm_ba, ip_any, aten")
        ->delimiter(',')
        ->capture_default_str();
    timing.add_to(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        return app.exit(e);
    }
    timing.apply_threads();
    c10::InferenceMode guard;
    const auto limits = ipex::bench::measure_machine_limits(at::get_num_threads(), 1.0);
    std::cout << "threads " << at::get_num_threads() << ", fp32 FMA peak " << std::fixed << std::setprecision(1)
              << limits.fp32_fma_gflops << " GFLOP/s\n";
    for (const auto &spec : shapes) {
        Shape s{};
        char sep = 0;
        std::istringstream(spec) >> s.m >> sep >> s.k >> sep >> s.n;
        at::manual_seed(0);
        const at::Tensor x = at::randn({s.m, s.k});
        const at::Tensor w = at::randn({s.n, s.k}) * 0.01;
        const at::Tensor b = at::randn({s.n});
        const at::Tensor y = at::empty({s.m, s.n});
        std::vector<ipex::bench::RunFn> runners;
        std::vector<std::string> names;
        std::vector<Prim> prims;
        prims.reserve(variants.size());
        c10::intrusive_ptr<ipex::ops::LinearContext> ctx;
        for (const auto &v : variants) {
            std::string impl;
            if (v == "ctx") {
                ctx = c10::make_intrusive<ipex::ops::LinearContext>(w, b, "fp32", ipex::ops::PostOps{}, s.m);
                runners.push_back([&, c = ctx] { c->run(x, c10::nullopt); });
            } else if (v == "aten") {
                runners.push_back([&] { at::linear(x, w, b); });
            } else {
                if (v == "mm_any") prims.push_back(make_matmul(x, w, b, y, memory::format_tag::any));
                else if (v == "mm_ab") prims.push_back(make_matmul(x, w, b, y, memory::format_tag::ab));
                else if (v == "mm_abpad") prims.push_back(make_matmul(x, w, b, y, memory::format_tag::ab, 16));
                else if (v == "mm_ba") prims.push_back(make_matmul(x, w, b, y, memory::format_tag::undef));
                else if (v == "ip_any") prims.push_back(make_inner_product(x, w, b, y));
                else throw CLI::ValidationError("--variants", "unknown variant " + v);
                impl = " (" + prims.back().impl + ")";
                runners.push_back([p = &prims.back()] { (*p)(); });
            }
            names.push_back(v + impl);
        }
        const auto stats = ipex::bench::time_round_robin(runners, timing.timing());
        const double gflop = 2.0 * s.m * s.k * s.n * 1e-9;
        std::cout << spec << " (" << std::setprecision(2) << gflop << " GFLOP)\n";
        for (size_t i = 0; i < names.size(); ++i) {
            const double gflops = gflop / (stats[i].median * 1e-3);
            std::cout << "  " << std::left << std::setw(40) << names[i] << std::right << std::setprecision(2)
                      << std::setw(9) << stats[i].median << " ms " << std::setprecision(1) << std::setw(7) << gflops
                      << " GFLOP/s " << std::setw(5) << 100.0 * gflops / limits.fp32_fma_gflops << "% of peak\n";
        }
    }
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception &e) {
        std::cerr << "linear_shapes: error: " << e.what() << "\n";
        return 5;
    }
}
