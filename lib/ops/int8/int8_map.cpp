// ipex::int8_map(input, table) -> fp32 and ipex::int8_requantize_map(input, table, scale,
// zero_point, dtype) -> quint8/qint8: an elementwise function of a per-tensor quint8/qint8
// tensor as a lookup of its 256 byte values (elementwise_maps.h makes them from dequantize ->
// silu/hardswish/... [-> quantize] chains). table: 256 fp32 values, or 256 output bytes
// (uint8), indexed by the stored byte (an s8 value's two's complement). The output keeps the
// input's strides when it is dense.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "ops/op_errors.h"
#include "ops/own_kernels.h"
#include "ops/int8/int8_quantize.h"
#include "ops/int8/q8_tensor.h"

namespace {

// dst[i] = table32[src[i]]: fp32 values, or bytes widened to 32 bits (bytes_out).
void lookup(const at::Tensor &src, const std::vector<int32_t> &table32, void *dst, bool bytes_out) {
    const auto *in = static_cast<const uint8_t *>(src.data_ptr());
    const bool avx512 = ipex::ops::own_kernels::available(false);
    at::parallel_for(0, src.numel(), 32768, [&](int64_t begin, int64_t end) {
        if (avx512) {
            const int64_t offset = bytes_out ? begin : begin * 4;
            return ipex::quant::quantize_kernel::map_avx512(in + begin, table32.data(),
                                                            static_cast<uint8_t *>(dst) + offset, end - begin,
                                                            bytes_out);
        }
        for (int64_t i = begin; i < end; ++i) {
            if (bytes_out)
                static_cast<uint8_t *>(dst)[i] = static_cast<uint8_t>(table32[in[i]]);
            else
                static_cast<int32_t *>(dst)[i] = table32[in[i]];
        }
    });
}

at::Tensor int8_map(const at::Tensor &input, const at::Tensor &table) {
    static const char *kOp = "ipex::int8_map";
    const at::Tensor src = ipex::quant::dense_q8_input(input, kOp);
    const std::vector<int32_t> table32 = ipex::quant::table_words(table, kOp);
    at::Tensor out = at::empty_strided(src.sizes(), src.strides(), src.options().dtype(at::kFloat));
    lookup(src, table32, out.data_ptr(), false);
    return out;
}

at::Tensor int8_requantize_map(const at::Tensor &input, const at::Tensor &table, double scale, int64_t zero_point,
                               at::ScalarType dtype) {
    static const char *kOp = "ipex::int8_requantize_map";
    const at::Tensor src = ipex::quant::dense_q8_input(input, kOp);
    ipex::quant::check_table(table, at::kByte, kOp);
    ipex::quant::check_q8_output(scale, zero_point, dtype, kOp);
    const at::Tensor bytes = table.contiguous();
    std::vector<int32_t> table32(bytes.data_ptr<uint8_t>(), bytes.data_ptr<uint8_t>() + 256);
    // A quantized tensor with src's strides: the dims in src's memory order, allocated
    // contiguous, permuted back.
    std::vector<int64_t> order(src.dim());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return src.stride(a) > src.stride(b); });
    std::vector<int64_t> sizes(src.dim()), back(src.dim());
    for (int64_t i = 0; i < src.dim(); ++i) {
        sizes[i] = src.size(order[i]);
        back[order[i]] = i;
    }
    const at::Tensor out =
        at::_empty_affine_quantized(sizes, src.options().dtype(dtype), scale, zero_point).permute(back);
    lookup(src, table32, out.data_ptr(), true);
    return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    m.def("int8_map(Tensor input, Tensor table) -> Tensor", IPEX_GUARDED(int8_map));
    m.def("int8_requantize_map(Tensor input, Tensor table, float scale, int zero_point, ScalarType dtype) -> Tensor",
          IPEX_GUARDED(int8_requantize_map));
}
