// The two readers of a squeeze-excite gate's input, on the int8 values it is mapped from
// (elementwise_maps.h, fuse_int8_gates): with s = table[x] (an ipex::int8_map, or a dequantize
// as the table of the 256 dequantized bytes),
//   ipex::int8_map_mean(x, table, dim, keepdim)           = s.mean(dim, keepdim)
//   ipex::int8_map_gate(x, table, gate, scale, zp, dtype) = quantize_per_tensor(s * gate)
// each reading one byte a value where the ops read four and wrote s and the product. The mean
// over the last two dims of a 4-D NCHW or channels-last tensor sums each channel one value after
// another in fp32 and divides by the count (aten sums in another order: the same within
// rounding); the gate rounds the product to fp32 and quantizes it as ipex::quantize_per_tensor
// does (bit for bit). Anything else (other dims, other layouts, a gate that is not one value per
// image and channel, a gate that is not fp32) runs the ops they stand for.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <cstring>
#include <vector>

#include "ops/op_errors.h"
#include "ops/own_kernels.h"
#include "ops/int8/int8_quantize.h"
#include "ops/int8/q8_tensor.h"

namespace {

namespace qk = ipex::quant::quantize_kernel;

// A 4-D tensor whose values are read in this order: NCHW contiguous or channels-last.
enum class Layout { other, planes, channels_last };

Layout layout_of(const at::Tensor &t) {
    if (t.dim() != 4) return Layout::other;
    if (t.is_contiguous()) return Layout::planes;
    if (t.is_contiguous(at::MemoryFormat::ChannelsLast)) return Layout::channels_last;
    return Layout::other;
}

float word_value(int32_t w) {
    float f;
    std::memcpy(&f, &w, sizeof f);
    return f;
}

// The kernels' view of the table: computed as a dequantize when it holds the input's
// dequantized bytes (a gate read from a dequantize), looked up otherwise (its word planes made
// once here into `planes`, 4 x 256 bytes, not by every task).
qk::ByteValues byte_values(const at::Tensor &src, const std::vector<int32_t> &words, std::vector<uint8_t> &planes) {
    qk::ByteValues v;
    v.table = words.data();
    v.is_signed = src.scalar_type() == at::kQInt8;
    v.zero_point = static_cast<int32_t>(src.q_zero_point());
    v.scale = static_cast<float>(src.q_scale());
    v.affine = true;
    for (int b = 0; b < 256 && v.affine; ++b) {
        const int32_t q = v.is_signed ? static_cast<int8_t>(b) : b;
        const float value = static_cast<float>(q - v.zero_point) * v.scale;
        v.affine = std::memcmp(&value, &words[b], sizeof value) == 0;
    }
    if (!v.affine) {
        planes.resize(4 * 256);
        qk::word_planes(words.data(), planes.data());
        v.planes = planes.data();
    }
    return v;
}

// The fp32 values the input stands for: what the ops the fused ones replace read.
at::Tensor mapped(const at::Tensor &input, const at::Tensor &table) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("ipex::int8_map", "")
                               .typed<at::Tensor(const at::Tensor &, const at::Tensor &)>();
    return op.call(input, table);
}

bool last_two_dims(const at::Tensor &t, at::IntArrayRef dim) {
    if (dim.size() != 2 || t.dim() < 2) return false;
    const int64_t a = at::maybe_wrap_dim(dim[0], t.dim()), b = at::maybe_wrap_dim(dim[1], t.dim());
    return (a == t.dim() - 2 && b == t.dim() - 1) || (a == t.dim() - 1 && b == t.dim() - 2);
}

at::Tensor int8_map_mean(const at::Tensor &input, const at::Tensor &table, at::IntArrayRef dim, bool keepdim) {
    static const char *kOp = "ipex::int8_map_mean";
    const at::Tensor src = ipex::quant::dense_q8_input(input, kOp);
    const std::vector<int32_t> words = ipex::quant::table_words(table, kOp);
    const Layout layout = layout_of(src);
    if (layout == Layout::other || !last_two_dims(src, dim) || src.size(2) * src.size(3) == 0)
        return at::mean(mapped(src, table), dim, keepdim);
    const int64_t n = src.size(0), c = src.size(1), pixels = src.size(2) * src.size(3);
    at::Tensor out = at::empty({n, c}, src.options().dtype(at::kFloat));
    const auto *in = static_cast<const uint8_t *>(src.data_ptr());
    float *sums = out.data_ptr<float>();
    const float count = static_cast<float>(pixels);
    if (layout == Layout::planes) {
        at::parallel_for(0, n * c, 1, [&](int64_t begin, int64_t end) {
            for (int64_t plane = begin; plane < end; ++plane) {
                const uint8_t *values = in + plane * pixels;
                float sum = 0.f;
                for (int64_t p = 0; p < pixels; ++p) sum += word_value(words[values[p]]);
                sums[plane] = sum / count;
            }
        });
    } else {
        constexpr int64_t kBlock = 64;  // channels summed at once
        const int64_t blocks = (c + kBlock - 1) / kBlock;
        const bool avx512 = ipex::ops::own_kernels::available(false);
        std::vector<uint8_t> planes;
        const qk::ByteValues values = byte_values(src, words, planes);
        at::parallel_for(0, n * blocks, 1, [&](int64_t begin, int64_t end) {
            for (int64_t task = begin; task < end; ++task) {
                const int64_t image = task / blocks, c0 = task % blocks * kBlock;
                const int64_t width = std::min(kBlock, c - c0);
                const uint8_t *first = in + image * pixels * c + c0;
                float *dst = sums + image * c + c0;
                if (avx512) {
                    qk::map_channel_sums_avx512(first, c, pixels, width, values, dst);
                } else {
                    std::fill(dst, dst + width, 0.f);
                    for (int64_t p = 0; p < pixels; ++p)
                        for (int64_t k = 0; k < width; ++k) dst[k] += word_value(words[first[p * c + k]]);
                }
                for (int64_t k = 0; k < width; ++k) dst[k] /= count;
            }
        });
    }
    return keepdim ? out.view({n, c, 1, 1}) : out;
}

// The gate as one value per image and channel, when it broadcasts to src that way.
bool per_channel_gate(const at::Tensor &gate, const at::Tensor &src, at::Tensor *values) {
    if (gate.scalar_type() != at::kFloat || gate.is_quantized() || gate.dim() > 4) return false;
    for (int64_t d = 0; d < gate.dim(); ++d) {
        const int64_t axis = d + 4 - gate.dim();  // src's dim this one lines up with
        if (gate.size(d) != 1 && (axis >= 2 || gate.size(d) != src.size(axis))) return false;
    }
    *values = gate.expand({src.size(0), src.size(1), 1, 1}).reshape({src.size(0), src.size(1)}).contiguous();
    return true;
}

at::Tensor int8_map_gate(const at::Tensor &input, const at::Tensor &table, const at::Tensor &gate, double scale,
                         int64_t zero_point, at::ScalarType dtype) {
    static const char *kOp = "ipex::int8_map_gate";
    const at::Tensor src = ipex::quant::dense_q8_input(input, kOp);
    const std::vector<int32_t> words = ipex::quant::table_words(table, kOp);
    ipex::quant::check_q8_output(scale, zero_point, dtype, kOp);
    const Layout layout = layout_of(src);
    at::Tensor g;
    if (layout == Layout::other || !per_channel_gate(gate, src, &g)) {
        static const auto quantize = c10::Dispatcher::singleton()
                                         .findSchemaOrThrow("ipex::quantize_per_tensor", "")
                                         .typed<at::Tensor(const at::Tensor &, double, int64_t, at::ScalarType)>();
        return quantize.call(at::mul(mapped(src, table), gate), scale, zero_point, dtype);
    }
    const int64_t n = src.size(0), c = src.size(1), pixels = src.size(2) * src.size(3);
    const at::Tensor out = at::_empty_affine_quantized(src.sizes(), src.options().dtype(dtype), scale, zero_point,
                                                       layout == Layout::planes ? at::MemoryFormat::Contiguous
                                                                                : at::MemoryFormat::ChannelsLast);
    const qk::Params p = qk::params_for(scale, zero_point, dtype == at::kQInt8);
    const auto *in = static_cast<const uint8_t *>(src.data_ptr());
    auto *dst = static_cast<uint8_t *>(out.data_ptr());
    const float *gv = g.data_ptr<float>();
    const bool avx512 = ipex::ops::own_kernels::available(false);
    std::vector<uint8_t> planes;
    const qk::ByteValues values = byte_values(src, words, planes);
    // A run of values with one gate (a plane), or of whole pixels (channels-last rows).
    auto run = [&](int64_t offset, int64_t count, int64_t channels, const float *gates) {
        if (avx512) return qk::map_gate_avx512(in + offset, dst + offset, count, channels, gates, values, p);
        for (int64_t i = 0; i < count; ++i) {
            const float y = word_value(words[in[offset + i]]) * gates[channels ? i % channels : 0];
            dst[offset + i] = qk::quantize_value(y, p);
        }
    };
    if (layout == Layout::planes) {
        at::parallel_for(0, n * c, 1, [&](int64_t begin, int64_t end) {
            for (int64_t plane = begin; plane < end; ++plane) run(plane * pixels, pixels, 0, gv + plane);
        });
    } else {
        const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(c, 1));  // pixels per task
        at::parallel_for(0, n * pixels, grain, [&](int64_t begin, int64_t end) {
            for (int64_t px = begin; px < end;) {  // whole images' rows at a time
                const int64_t image = px / pixels, stop = std::min(end, (image + 1) * pixels);
                run(px * c, (stop - px) * c, c, gv + image * c);
                px = stop;
            }
        });
    }
    return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    m.def("int8_map_mean(Tensor input, Tensor table, int[] dim, bool keepdim) -> Tensor",
          IPEX_GUARDED(int8_map_mean));
    m.def("int8_map_gate(Tensor input, Tensor table, Tensor gate, float scale, int zero_point, ScalarType dtype) -> "
          "Tensor",
          IPEX_GUARDED(int8_map_gate));
}

