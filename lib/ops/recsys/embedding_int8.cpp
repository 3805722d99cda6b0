// Row-wise uint8 tables (recsys_ops.h): each row's min and max give its scale and bias, the
// values round to the nearest of the 256 levels between them.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/op_errors.h"
#include "ops/recsys/embedding_bag_kernel.h"
#include "ops/recsys/recsys_ops.h"

namespace ipex::ops::recsys {
namespace {

constexpr float kLevels = 255.f;  // the largest uint8 value: q in [0, 255]
constexpr int64_t kRowsPerTask = 64;

void quantize_row(const float *src, int64_t dim, uint8_t *dst) {
    float lo = 0.f, hi = 0.f;
    if (dim > 0) {
        const auto [min, max] = std::minmax_element(src, src + dim);
        lo = *min;
        hi = *max;
    }
    const float scale = (hi - lo) / kLevels;
    for (int64_t k = 0; k < dim; ++k) {
        const float level = scale > 0.f ? std::nearbyint((src[k] - lo) / scale) : 0.f;
        dst[k] = static_cast<uint8_t>(std::clamp(level, 0.f, kLevels));
    }
    std::memcpy(dst + dim, &scale, sizeof(float));
    std::memcpy(dst + dim + sizeof(float), &lo, sizeof(float));
}

}  // namespace

at::Tensor quantize_rows_uint8(const at::Tensor &table) {
    IPEX_CHECK_INPUT(table.dim() == 2 && (table.scalar_type() == at::kFloat || table.scalar_type() == at::kBFloat16),
                     "quantize_rows_uint8: the table must be an fp32 or bf16 matrix, got ", table.scalar_type(), " ",
                     table.sizes());
    const at::Tensor src = table.to(at::kFloat).contiguous();
    IPEX_CHECK_INPUT(src.isfinite().all().item<bool>(), "quantize_rows_uint8: the table holds a NaN or infinity");
    const int64_t rows = src.size(0), dim = src.size(1);
    at::Tensor dst = at::empty({rows, dim + kRowwiseTailBytes}, src.options().dtype(at::kByte));
    const float *in = src.data_ptr<float>();
    uint8_t *out = dst.data_ptr<uint8_t>();
    at::parallel_for(0, rows, kRowsPerTask, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) quantize_row(in + r * dim, dim, out + r * (dim + kRowwiseTailBytes));
    });
    return dst;
}

at::Tensor dequantize_rows_uint8(const at::Tensor &packed) {
    IPEX_CHECK_INPUT(packed.dim() == 2 && packed.scalar_type() == at::kByte && packed.size(1) >= kRowwiseTailBytes,
                     "dequantize_rows_uint8: the table must be uint8 [rows, dim + 8], got ", packed.scalar_type(), " ",
                     packed.sizes());
    const at::Tensor src = packed.contiguous();
    const int64_t rows = src.size(0), dim = src.size(1) - kRowwiseTailBytes;
    at::Tensor dst = at::empty({rows, dim}, src.options().dtype(at::kFloat));
    for (int64_t r = 0; r < rows; ++r) {
        const uint8_t *row = src.data_ptr<uint8_t>() + r * src.size(1);
        float scale = 0.f, bias = 0.f;
        read_row_tail(row, dim, &scale, &bias);
        float *out = dst.data_ptr<float>() + r * dim;
        for (int64_t k = 0; k < dim; ++k) out[k] = static_cast<float>(row[k]) * scale + bias;
    }
    return dst;
}

}  // namespace ipex::ops::recsys
