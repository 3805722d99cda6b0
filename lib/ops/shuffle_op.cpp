#include "ops/shuffle_op.h"

#include <ATen/InferSize.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cstdint>
#include <exception>
#include <optional>

#include "ops/onednn_utils.h"
#include "ops/op_errors.h"
#include "ops/own_kernels.h"

namespace ipex::ops {
namespace {

// The fast path's shape: group count and total channels.
struct Shuffle {
    int64_t groups = 0, channels = 0;
};

// The shuffle's shape when the fast path applies, else nothing.
std::optional<Shuffle> gather_groups(at::TensorList inputs, at::IntArrayRef grouped,
                                     at::IntArrayRef sizes) {
    if (inputs.empty()) return std::nullopt;
    const at::Tensor &first = inputs.front();
    const auto type = first.scalar_type();
    if (type != at::kFloat && type != at::kBFloat16) return std::nullopt;
    int64_t c = 0;
    for (const at::Tensor &t : inputs) {
        if (!t.defined() || t.dim() != 4 || t.scalar_type() != type || !t.device().is_cpu() || t.is_quantized() ||
            !t.is_contiguous(at::MemoryFormat::ChannelsLast) || t.size(0) != first.size(0) ||
            t.size(2) != first.size(2) || t.size(3) != first.size(3))
            return std::nullopt;
        c += t.size(1);
    }
    const int64_t n = first.size(0), h = first.size(2), w = first.size(3), numel = n * c * h * w;
    if (numel == 0 || grouped.size() != 5 || sizes.size() != 4) return std::nullopt;
    std::vector<int64_t> g5, s4;
    try {  // infer_size checks the -1s and the element count (the chain then raises aten's error)
        g5 = at::infer_size(grouped, numel);
        s4 = at::infer_size(sizes, numel);
    } catch (const std::exception &) {
        return std::nullopt;
    }
    const int64_t g = g5[1];
    if (g < 2 || g5[2] < 2 || g5[0] != n || g * g5[2] != c || g5[3] != h || g5[4] != w) return std::nullopt;
    if (s4 != std::vector<int64_t>{n, c, h, w}) return std::nullopt;
    return Shuffle{g, c};
}

// One source of the gather: the group's first channel and the pixel stride of its tensor.
struct Source {
    const void *base = nullptr;
    int64_t stride = 0;
};

// Output channel o = j * g + i (source i's channel j) of pixel p, written to part o / cc at
// channel o % cc, for pixels [begin, end): any group count (two groups take
// own_kernels::run_interleave instead where it runs).
template <typename T>
void gather(const std::vector<Source> &src, int64_t cpg, const std::vector<void *> &parts, int64_t begin,
            int64_t end) {
    const int64_t g = static_cast<int64_t>(src.size()), cc = g * cpg / static_cast<int64_t>(parts.size());
    for (int64_t p = begin; p < end; ++p) {
        int64_t i = 0, j = 0;
        for (void *part : parts) {
            T *o = static_cast<T *>(part) + p * cc;
            for (int64_t k = 0; k < cc; ++k) {
                o[k] = static_cast<const T *>(src[i].base)[p * src[i].stride + j];
                if (++i == g) {
                    i = 0;
                    ++j;
                }
            }
        }
    }
}

at::Tensor run_chain(at::TensorList inputs, at::IntArrayRef grouped, at::IntArrayRef sizes) {
    const at::Tensor joined = inputs.size() == 1 ? inputs.front() : at::cat(inputs, 1);
    return joined.contiguous().view(grouped).transpose(1, 2).contiguous().view(sizes);
}

// The shuffle of inputs (of the shape gather_groups gave) written into `count` channels-last
// tensors of c / count channels each, in order (count divides c).
std::vector<at::Tensor> shuffle_into(at::TensorList inputs, const Shuffle &shape, int64_t count) {
    const at::Tensor &first = inputs.front();
    const int64_t g = shape.groups, c = shape.channels;
    const int64_t cpg = c / g, cc = c / count, pixels = first.size(0) * first.size(2) * first.size(3);
    const int64_t item = first.element_size();
    // Group i starts at channel i * cpg of the concatenation: find the input holding it. A
    // group spanning two inputs (inputs not cut at group boundaries) joins them first.
    std::vector<Source> src;
    at::Tensor joined;
    for (int64_t i = 0, at_input = 0, offset = 0; i < g; ++i) {
        const int64_t channel = i * cpg;
        while (at_input < static_cast<int64_t>(inputs.size()) && channel >= offset + inputs[at_input].size(1))
            offset += inputs[at_input++].size(1);
        const at::Tensor &t = inputs[at_input];
        if (channel + cpg > offset + t.size(1)) {
            src.clear();
            break;
        }
        src.push_back({static_cast<const char *>(t.data_ptr()) + (channel - offset) * item, t.size(1)});
    }
    if (src.empty()) {
        joined = at::cat(inputs, 1).contiguous(at::MemoryFormat::ChannelsLast);
        for (int64_t i = 0; i < g; ++i)
            src.push_back({static_cast<const char *>(joined.data_ptr()) + i * cpg * item, c});
    }
    std::vector<at::Tensor> parts;
    for (int64_t k = 0; k < count; ++k)
        parts.push_back(empty_channels_last({first.size(0), cc, first.size(2), first.size(3)}, first.scalar_type()));
    // Two groups: part k is the interleave of both groups' channels [k cc / 2, (k + 1) cc / 2)
    // when cc is even.
    if (g == 2 && cc % 2 == 0 && own_kernels::interleave_available()) {
        for (int64_t k = 0; k < count; ++k) {
            own_kernels::Interleave p;
            p.bf16 = item == 2;
            p.a = static_cast<const char *>(src[0].base) + k * (cc / 2) * item;
            p.b = static_cast<const char *>(src[1].base) + k * (cc / 2) * item;
            p.a_stride = src[0].stride;
            p.b_stride = src[1].stride;
            p.dst = parts[k].data_ptr();
            p.cpg = cc / 2;
            p.pixels = pixels;
            own_kernels::run_interleave(p);
        }
        return parts;
    }
    std::vector<void *> dst;
    for (const at::Tensor &part : parts) dst.push_back(part.data_ptr());
    const int64_t grain = std::max<int64_t>(1, 16384 / c);
    at::parallel_for(0, pixels, grain, [&](int64_t begin, int64_t end) {
        if (item == 2)
            gather<uint16_t>(src, cpg, dst, begin, end);
        else
            gather<uint32_t>(src, cpg, dst, begin, end);
    });
    return parts;
}

}  // namespace

bool channel_shuffle_gathers(at::TensorList inputs, at::IntArrayRef grouped, at::IntArrayRef sizes) {
    return gather_groups(inputs, grouped, sizes).has_value();
}

at::Tensor channel_shuffle(at::TensorList inputs, at::IntArrayRef grouped, at::IntArrayRef sizes) {
    const auto shape = gather_groups(inputs, grouped, sizes);
    if (!shape) return run_chain(inputs, grouped, sizes);
    return shuffle_into(inputs, *shape, 1).front();
}

std::vector<at::Tensor> channel_shuffle_chunk(at::TensorList inputs, at::IntArrayRef grouped, at::IntArrayRef sizes,
                                              int64_t chunks) {
    const auto shape = gather_groups(inputs, grouped, sizes);
    if (shape && chunks >= 1 && shape->channels % chunks == 0) return shuffle_into(inputs, *shape, chunks);
    return at::chunk(channel_shuffle(inputs, grouped, sizes), chunks, 1);
}

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    m.def("channel_shuffle(Tensor[] inputs, int[] grouped, int[] sizes) -> Tensor",
          IPEX_GUARDED(ipex::ops::channel_shuffle));
    m.def("channel_shuffle_chunk(Tensor[] inputs, int[] grouped, int[] sizes, int chunks) -> Tensor[]",
          IPEX_GUARDED(ipex::ops::channel_shuffle_chunk));
}

}  // namespace ipex::ops
