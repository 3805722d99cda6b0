// Runs a few bf16 matmuls through oneDNN and prints a marker line, so tests can read
// the implementation oneDNN picked from ONEDNN_VERBOSE=1 output.
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdio>

int main() {
    using dnnl::memory;
    constexpr int kIterations = 4;
    const memory::dim m = 64, k = 256, n = 256;
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(engine);
    const memory::desc src_md({m, k}, memory::data_type::bf16, memory::format_tag::ab);
    const memory::desc wei_md({k, n}, memory::data_type::bf16, memory::format_tag::ab);
    const memory::desc dst_md({m, n}, memory::data_type::f32, memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src_md, wei_md, dst_md), engine);
    memory src(src_md, engine), wei(wei_md, engine), dst(dst_md, engine);
    const dnnl::matmul matmul(pd);
    for (int i = 0; i < kIterations; ++i)
        matmul.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
    stream.wait();
    std::printf("bf16 matmul done: %s\n", pd.impl_info_str());
    return 0;
}
