#include "ops/onednn_utils.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <unordered_map>

#include "ops/own_kernels.h"

namespace ipex::ops {

const dnnl::engine &cpu_engine() {
    static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    return engine;
}

dnnl::stream &thread_stream() {
    thread_local dnnl::stream stream(cpu_engine());
    return stream;
}

dnnl::memory::data_type to_dnnl(at::ScalarType type) {
    switch (type) {
        case at::kFloat: return dnnl::memory::data_type::f32;
        case at::kBFloat16: return dnnl::memory::data_type::bf16;
        case at::kHalf: return dnnl::memory::data_type::f16;
        case at::kInt: return dnnl::memory::data_type::s32;
        case at::kChar: return dnnl::memory::data_type::s8;
        case at::kByte: return dnnl::memory::data_type::u8;
        default: TORCH_CHECK(false, "ipex ops: no oneDNN data type for ", type);
    }
}

dnnl::memory::dims to_dims(at::IntArrayRef sizes) {
    return dnnl::memory::dims(sizes.begin(), sizes.end());
}

dnnl::memory::desc strided_desc(const at::Tensor &t) {
    return dnnl::memory::desc(to_dims(t.sizes()), to_dnnl(t.scalar_type()), to_dims(t.strides()));
}

dnnl::memory::desc odd_line_rows(const dnnl::memory::desc &desc) {
    const dnnl_memory_desc_t &c = desc.data;
    if (c.ndims != 2 || c.format_kind != dnnl_blocked || c.format_desc.blocking.inner_nblks != 0 ||
        c.offset0 != 0 || c.dims[0] != c.padded_dims[0] || c.dims[1] != c.padded_dims[1])
        return {};
    const int64_t rows = c.dims[0], cols = c.dims[1];
    if (c.format_desc.blocking.strides[1] != 1 || c.format_desc.blocking.strides[0] != cols || rows < 2) return {};
    const int64_t element = static_cast<int64_t>(dnnl::memory::data_type_size(desc.data_type()));
    if (kCacheLineBytes % element != 0) return {};
    const int64_t per_line = kCacheLineBytes / element;
    int64_t lines = (cols + per_line - 1) / per_line;
    if (lines % 2 == 0) ++lines;
    if (lines * per_line == cols) return {};
    return dnnl::memory::desc({rows, cols}, desc.data_type(), dnnl::memory::dims{lines * per_line, 1});
}

dnnl::memory wrap(const at::Tensor &t, const dnnl::memory::desc &desc) {
    return dnnl::memory(desc, cpu_engine(), t.data_ptr());
}

namespace {

// Order of the dims in memory for the channels-last layout of a rank: N, spatial..., C.
std::vector<int64_t> channels_last_order(int64_t rank) {
    std::vector<int64_t> order{0};
    for (int64_t d = 2; d < rank; ++d) order.push_back(d);
    order.push_back(1);
    return order;
}

}  // namespace

at::Tensor empty_channels_last(at::IntArrayRef sizes, at::ScalarType type) {
    const int64_t rank = static_cast<int64_t>(sizes.size());
    const auto options = at::TensorOptions().dtype(type);
    if (rank == 4) return at::empty(sizes, options.memory_format(at::MemoryFormat::ChannelsLast));
    if (rank == 5) return at::empty(sizes, options.memory_format(at::MemoryFormat::ChannelsLast3d));
    TORCH_CHECK(rank >= 3, "ipex ops: channels-last needs rank >= 3, got ", rank);
    const auto order = channels_last_order(rank);
    std::vector<int64_t> physical;
    for (int64_t d : order) physical.push_back(sizes[d]);
    std::vector<int64_t> inverse(rank);
    for (int64_t i = 0; i < rank; ++i) inverse[order[i]] = i;
    return at::empty(physical, options).permute(inverse);
}

at::Tensor zeros_channels_last(at::IntArrayRef sizes, at::ScalarType type) {
    return empty_channels_last(sizes, type).zero_();
}

bool is_channels_last(const at::Tensor &t) {
    const int64_t rank = t.dim();
    if (rank == 4) return t.is_contiguous(at::MemoryFormat::ChannelsLast);
    if (rank == 5) return t.is_contiguous(at::MemoryFormat::ChannelsLast3d);
    if (rank < 3) return false;
    int64_t expected = 1;
    const auto order = channels_last_order(rank);
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        if (t.size(*it) != 1 && t.stride(*it) != expected) return false;
        expected *= t.size(*it);
    }
    return true;
}

at::Tensor to_channels_last(const at::Tensor &t, at::ScalarType type) {
    if (t.scalar_type() == type && is_channels_last(t)) return t;
    at::Tensor dst = empty_channels_last(t.sizes(), type);
    // A stem's image batch (dense NCHW fp32, three channels): the own kernel reads each plane
    // once and writes the pixels once, where aten casts and then permutes (SqueezeNet b8's stem
    // with its 8x3x224x224 input 1.25 -> 1.08 ms in bf16, 1.82 -> 1.58 ms in fp32).
    const bool lowp = type == at::kBFloat16;
    if (t.dim() == 4 && t.size(1) == 3 && t.scalar_type() == at::kFloat && t.is_contiguous() &&
        (lowp || type == at::kFloat) && own_kernels::available(lowp)) {
        own_kernels::ThreePlanes p;
        p.src = t.data_ptr<float>();
        p.dst = dst.data_ptr();
        p.bf16 = lowp;
        p.n = t.size(0);
        p.pixels = t.size(2) * t.size(3);
        own_kernels::run_three_planes_to_pixels(p);
        return dst;
    }
    // aten's copy that casts and permutes at once runs a slow generic loop (0.78 ms for an
    // 8x3x224x224 fp32 batch to channels-last bf16); the cast keeping the layout, then the
    // permuting copy in the new dtype, take 0.24 ms.
    if (t.scalar_type() != type && !is_channels_last(t))
        dst.copy_(t.to(type));
    else
        dst.copy_(t);
    return dst;
}

namespace {

// The scratchpad of the calling thread: grown when a primitive needs more, then kept. A
// thread runs one primitive at a time (execute waits), so reuse is safe, and it spares each
// call a fresh allocation of up to megabytes with its page faults.
void *thread_scratchpad(size_t bytes) {
    struct Buffer {
        void *data = nullptr;
        size_t size = 0;
        ~Buffer() { std::free(data); }
    };
    thread_local Buffer buffer;
    if (buffer.size < bytes) {
        constexpr size_t kAlign = 64;
        const size_t size = (bytes + kAlign - 1) / kAlign * kAlign;
        std::free(buffer.data);
        buffer.data = std::aligned_alloc(kAlign, size);
        buffer.size = buffer.data ? size : 0;
        TORCH_CHECK(buffer.data, "ipex ops: cannot allocate a scratchpad of ", bytes, " bytes");
    }
    return buffer.data;
}

}  // namespace

void execute(const dnnl::primitive &primitive, const dnnl::memory::desc &scratchpad,
             std::unordered_map<int, dnnl::memory> args) {
    if (scratchpad.get_size() > 0)
        args.emplace(DNNL_ARG_SCRATCHPAD,
                     dnnl::memory(scratchpad, cpu_engine(), thread_scratchpad(scratchpad.get_size())));
    auto &stream = thread_stream();
    primitive.execute(stream, args);
    stream.wait();
}

}  // namespace ipex::ops
