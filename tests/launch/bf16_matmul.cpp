// Runs a few bf16 matmuls (fp32 on a CPU where oneDNN has no bf16 matmul) through oneDNN and
// prints a marker line, so tests can read the implementation oneDNN picked from
// ONEDNN_VERBOSE=1 output.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdio>

namespace {

// Runs the matmuls in `type`; false when oneDNN has no implementation of it on this CPU.
bool run(dnnl::memory::data_type type, const char *name) {
    using dnnl::memory;
    constexpr int kIterations = 4;
    const memory::dim m = 64, k = 256, n = 256;
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(engine);
    const memory::desc src_md({m, k}, type, memory::format_tag::ab);
    const memory::desc wei_md({k, n}, type, memory::format_tag::ab);
    const memory::desc dst_md({m, n}, memory::data_type::f32, memory::format_tag::ab);
    dnnl::matmul::primitive_desc pd;
    try {
        pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_md, dst_md), engine);
    } catch (const dnnl::error &) {
        return false;
    }
    memory src(src_md, engine), wei(wei_md, engine), dst(dst_md, engine);
    const dnnl::matmul matmul(pd);
    for (int i = 0; i < kIterations; ++i)
        matmul.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
    stream.wait();
    std::printf("%s matmul done: %s\n", name, pd.impl_info_str());
    return true;
}

}  // namespace

// bf16 where oneDNN has it (AVX-512 CPUs), else fp32.
int main() {
    if (run(dnnl::memory::data_type::bf16, "bf16")) return 0;
    return run(dnnl::memory::data_type::f32, "f32") ? 0 : 1;
}
