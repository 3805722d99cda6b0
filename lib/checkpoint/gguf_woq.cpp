#include "checkpoint/gguf_woq.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Half.h>

#include <atomic>
#include <cmath>
#include <cstring>

#include "checkpoint/gguf.h"
#include "ops/woq/woq_layout.h"

namespace ipex::woq {
namespace {

constexpr int64_t kGgmlBlock = 32;  // elements per q4_0 / q4_1 / q8_0 block: one kernel group
static_assert(kGgmlBlock == kBlock, "a GGUF block must be one int4 block of the kernel layout");

float half_at(const uint8_t *p) {
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    return static_cast<float>(c10::Half(bits, c10::Half::from_bits()));
}

// One block of 32 from its GGUF bytes into the packed row (int4: 16 bytes, int8: 32 bytes) and
// its scale and zero; false when the block is not held exactly (q4_1 with a non-finite d or m).
bool convert_block(GgmlType type, const uint8_t *src, uint8_t *dst, float &scale, float &zero) {
    switch (type) {
    case GgmlType::q4_0:
        scale = half_at(src);
        zero = 8.f;
        std::memcpy(dst, src + 2, kGgmlBlock / 2);
        return true;
    case GgmlType::q8_0:
        scale = half_at(src);
        zero = 128.f;
        for (int64_t j = 0; j < kGgmlBlock; ++j) dst[j] = static_cast<uint8_t>(src[2 + j] ^ 0x80);  // int8 + 128
        return true;
    case GgmlType::q4_1: {
        const float d = half_at(src), m = half_at(src + 2);
        if (!std::isfinite(d) || !std::isfinite(m)) return false;
        if (d == 0.f) {  // every element is m: (0 - (-1)) * m
            scale = m;
            zero = -1.f;
            std::memset(dst, 0, kGgmlBlock / 2);
            return true;
        }
        scale = d;
        zero = -m / d;
        std::memcpy(dst, src + 4, kGgmlBlock / 2);
        return true;
    }
    default: return false;
    }
}

}  // namespace

bool ggml_woq_exact(uint32_t type) {
    const auto t = static_cast<GgmlType>(type);
    return t == GgmlType::q4_0 || t == GgmlType::q8_0 || t == GgmlType::q4_1;
}

std::optional<WoqLayer> ggml_to_woq(const std::string &name, uint32_t type, const uint8_t *src, int64_t rows,
                                    int64_t cols, const std::vector<int64_t> *row_order) {
    TORCH_INTERNAL_ASSERT(ggml_woq_exact(type) && rows > 0 && cols > 0 && cols % kGgmlBlock == 0);
    TORCH_INTERNAL_ASSERT(!row_order || static_cast<int64_t>(row_order->size()) == rows);
    uint64_t block_elements = 0, block_bytes = 0;
    ggml_type_layout(type, block_elements, block_bytes);
    const auto t = static_cast<GgmlType>(type);
    const int bits = t == GgmlType::q8_0 ? 8 : 4;
    const int64_t groups = cols / kGgmlBlock;
    const int64_t row_bytes = packed_row_bytes(cols, bits), group_bytes = row_bytes / groups;
    WoqLayer layer;
    layer.name = name;
    layer.in_features = cols;
    layer.out_features = rows;
    layer.bits = bits;
    layer.group_size = kGgmlBlock;
    layer.source_group_size = kGgmlBlock;
    layer.qweight = at::empty({rows, row_bytes}, at::kByte);
    layer.scales = at::empty({rows, groups}, at::kFloat);
    layer.zeros = at::empty({rows, groups}, at::kFloat);
    uint8_t *q = layer.qweight.data_ptr<uint8_t>();
    float *s = layer.scales.data_ptr<float>(), *z = layer.zeros.data_ptr<float>();
    std::atomic<bool> exact{true};
    at::parallel_for(0, rows, 16, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t from = row_order ? (*row_order)[static_cast<size_t>(r)] : r;
            const uint8_t *row = src + static_cast<uint64_t>(from) * static_cast<uint64_t>(groups) * block_bytes;
            for (int64_t g = 0; g < groups; ++g)
                if (!convert_block(t, row + static_cast<uint64_t>(g) * block_bytes, q + r * row_bytes + g * group_bytes,
                                   s[r * groups + g], z[r * groups + g]))
                    exact = false;
        }
    });
    if (!exact) return std::nullopt;
    return layer;
}

}  // namespace ipex::woq
