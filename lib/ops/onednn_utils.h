// oneDNN plumbing shared by the prepacked ops: the CPU engine, a stream per thread, dtype
// mapping and memory descriptors that describe a tensor's real strides.
#pragma once

#include <algorithm>

#include <ATen/ATen.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <string>
#include <unordered_map>
#include <vector>

namespace ipex::ops {

const dnnl::engine &cpu_engine();

// One stream per calling thread: executing from several threads at once is safe.
dnnl::stream &thread_stream();

dnnl::memory::data_type to_dnnl(at::ScalarType type);

dnnl::memory::dims to_dims(at::IntArrayRef sizes);

// fp32 or bf16: the dtypes a fused post-op tensor and the output may have.
inline bool onednn_float(at::ScalarType type) { return type == at::kFloat || type == at::kBFloat16; }

// Whether tensors of shapes a and b broadcast together (aten's rules).
inline bool broadcastable(at::IntArrayRef a, at::IntArrayRef b) {
    for (size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
        const int64_t x = a[a.size() - i], y = b[b.size() - i];
        if (x != y && x != 1 && y != 1) return false;
    }
    return true;
}

// A descriptor with the tensor's sizes and strides (no copy, any layout).
dnnl::memory::desc strided_desc(const at::Tensor &t);

// Bytes of a cache line, the unit odd_line_rows pads rows to.
constexpr int64_t kCacheLineBytes = 64;

// `desc`, a dense row-major 2-D layout ([rows, cols], strides {cols, 1}), with its rows padded
// to an odd number of cache lines; a zero desc when `desc` is not that layout or its rows already
// span an odd number of whole lines. Rows an even number of lines apart (512, 1024, 4096 fp32
// columns: a power-of-two multiple of the line) share cache sets, so a kernel walking down
// the columns thrashes them; odd strides spread the rows over all sets.
dnnl::memory::desc odd_line_rows(const dnnl::memory::desc &desc);

// Wraps the tensor's storage (the tensor must outlive the memory object).
dnnl::memory wrap(const at::Tensor &t, const dnnl::memory::desc &desc);

// Memory format of activations between prepacked ops: NWC / NHWC / NDHWC for 3/4/5-D.
// The returned tensor has the logical shape `sizes` (N, C, spatial...).
at::Tensor empty_channels_last(at::IntArrayRef sizes, at::ScalarType type);
at::Tensor zeros_channels_last(at::IntArrayRef sizes, at::ScalarType type);
bool is_channels_last(const at::Tensor &t);
// Copy (converting dtype) into the channels-last layout unless already there.
at::Tensor to_channels_last(const at::Tensor &t, at::ScalarType type);

// The dtype of the bias a primitive with output `dst` takes: bf16 for bf16 outputs, else fp32.
inline at::ScalarType bias_type(at::ScalarType dst) { return dst == at::kBFloat16 ? at::kBFloat16 : at::kFloat; }

// Whether oneDNN built the primitive descriptor with its reference kernel ("ref:any"), the
// plain C++ loops that run one to two orders of magnitude slower than its jit kernels.
inline bool is_reference(const dnnl::primitive_desc_base &pd) {
    return std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
}

// Runs `primitive` with the calling thread's scratchpad (thread safe: each thread has its own) and waits.
void execute(const dnnl::primitive &primitive, const dnnl::memory::desc &scratchpad,
             std::unordered_map<int, dnnl::memory> args);

}  // namespace ipex::ops
