#include "checkpoint/gguf_woq.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "checkpoint/gguf.h"
#include "ops/woq/woq_layout.h"

namespace ipex::woq {
namespace {

constexpr int64_t kGroup = 32;  // elements per q4_0 / q4_1 / q8_0 block and per K-quant sub-block: one kernel group
static_assert(kGroup == kBlock, "a GGUF block must be one int4 block of the kernel layout");
constexpr int64_t kSuperBlock = 256;  // elements per q4_K / q5_K block: 8 sub-blocks of 32

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
        std::memcpy(dst, src + 2, kGroup / 2);
        return true;
    case GgmlType::q8_0:
        scale = half_at(src);
        zero = 128.f;
        for (int64_t j = 0; j < kGroup; ++j) dst[j] = static_cast<uint8_t>(src[2 + j] ^ 0x80);  // int8 + 128
        return true;
    case GgmlType::q4_1: {
        const float d = half_at(src), m = half_at(src + 2);
        if (!std::isfinite(d) || !std::isfinite(m)) return false;
        if (d == 0.f) {  // every element is m: (0 - (-1)) * m
            scale = m;
            zero = -1.f;
            std::memset(dst, 0, kGroup / 2);
            return true;
        }
        scale = d;
        zero = -m / d;
        std::memcpy(dst, src + 4, kGroup / 2);
        return true;
    }
    default: return false;
    }
}

// The 6-bit scale and min of sub-block j of a q4_K / q5_K block from its 12 packed bytes.
void scale_min_k4(int j, const uint8_t *q, int &sc, int &m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// A q4_K / q5_K block of 256 into 8 groups of 32: dst the packed bytes of its first group (the
// others follow at group_bytes), scale and zero its 8 entries. Sub-block j holds w = d1 q - m1
// with d1 = d sc_j and m1 = dmin m_j (fp16 times 6 bits: both exact in fp32), here (q - m1 / d1)
// d1; a sub-block with d1 = 0 holds -m1 in every element, here q 0, zero 1, scale m1 (exact).
// Its 32 elements are the low (j even) or high (j odd) nibbles of bytes 32 (j / 2) .. + 31 and,
// for q5_K, bit j of the 32 high-bit bytes as 16.
bool convert_k_block(GgmlType type, const uint8_t *src, uint8_t *dst, int64_t group_bytes, float *scale, float *zero) {
    const bool five = type == GgmlType::q5_k;
    const float d = half_at(src), dmin = half_at(src + 2);
    if (!std::isfinite(d) || !std::isfinite(dmin)) return false;
    const uint8_t *scales = src + 4, *qh = src + 16, *qs = src + (five ? 48 : 16);
    for (int j = 0; j < static_cast<int>(kSuperBlock / kGroup); ++j) {
        int sc = 0, m = 0;
        scale_min_k4(j, scales, sc, m);
        const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
        uint8_t *out = dst + j * group_bytes;
        if (d1 == 0.f) {
            scale[j] = m1;
            zero[j] = m1 == 0.f ? 0.f : 1.f;
            std::memset(out, 0, static_cast<size_t>(group_bytes));
            continue;
        }
        scale[j] = d1;
        zero[j] = m1 / d1;
        const uint8_t *q = qs + (j / 2) * kGroup;
        const int shift = (j % 2) * 4;
        if (five) {  // int8: one byte an element
            for (int64_t l = 0; l < kGroup; ++l)
                out[l] = static_cast<uint8_t>(((q[l] >> shift) & 0xF) | (((qh[l] >> j) & 1) << 4));
        } else {  // int4: byte l holds element l low, element l + 16 high
            for (int64_t l = 0; l < kGroup / 2; ++l)
                out[l] = static_cast<uint8_t>(((q[l] >> shift) & 0xF) | (((q[l + kGroup / 2] >> shift) & 0xF) << 4));
        }
    }
    return true;
}

bool k_quant(GgmlType t) { return t == GgmlType::q4_k || t == GgmlType::q5_k; }

constexpr int64_t kQ6Bytes = 210;      // a q6_K block: 128 low nibbles, 64 high bit pairs, 16 int8 sc, fp16 d
constexpr int64_t kQ6SubBlock = 16;    // elements per q6_K scale
constexpr float kInt8Max = 127.f;      // the symmetric int8 grid: -127 .. 127

// A q6_K block of 256 into 8 int8 groups of 32 (gguf_woq.h): the dequantizer's fp32 values of
// each group re-quantized round-to-nearest with scale max|w| / 127, stored as q + 128 with zero
// 128 (the q8_0 form). dst is the first group's 32 bytes, the others follow at group_bytes.
bool convert_q6_k_block(const uint8_t *src, uint8_t *dst, int64_t group_bytes, float *scale, float *zero) {
    if (!std::isfinite(half_at(src + kQ6Bytes - 2))) return false;
    float w[kSuperBlock];
    dequantize_ggml(static_cast<uint32_t>(GgmlType::q6_k), src, kSuperBlock, w);
    for (int64_t g = 0; g < kSuperBlock / kGroup; ++g) {
        const float *v = w + g * kGroup;
        uint8_t *out = dst + g * group_bytes;
        float amax = 0.f;
        for (int64_t l = 0; l < kGroup; ++l) amax = std::max(amax, std::fabs(v[l]));
        zero[g] = 128.f;
        if (amax == 0.f) {  // zeros (d = 0, or both sub-blocks' sc 0): exact
            scale[g] = 0.f;
            std::memset(out, 128, static_cast<size_t>(kGroup));
            continue;
        }
        const float s = amax / kInt8Max;
        scale[g] = s;
        for (int64_t l = 0; l < kGroup; ++l) {
            const float q = std::min(kInt8Max, std::max(-kInt8Max, std::nearbyint(v[l] / s)));
            out[l] = static_cast<uint8_t>(static_cast<int>(q) + 128);
        }
    }
    return true;
}

}  // namespace

bool ggml_woq_exact(uint32_t type) {
    const auto t = static_cast<GgmlType>(type);
    return t == GgmlType::q4_0 || t == GgmlType::q8_0 || t == GgmlType::q4_1 || k_quant(t);
}

bool ggml_woq_held(uint32_t type) { return ggml_woq_exact(type) || static_cast<GgmlType>(type) == GgmlType::q6_k; }

std::optional<WoqLayer> ggml_to_woq(const std::string &name, uint32_t type, const uint8_t *src, int64_t rows,
                                    int64_t cols, const std::vector<int64_t> *row_order) {
    uint64_t block_elements = 0, block_bytes = 0;
    ggml_type_layout(type, block_elements, block_bytes);
    const auto t = static_cast<GgmlType>(type);
    const auto elements = static_cast<int64_t>(block_elements);
    TORCH_INTERNAL_ASSERT(ggml_woq_held(type) && rows > 0 && cols > 0 && cols % elements == 0);
    TORCH_INTERNAL_ASSERT(!row_order || static_cast<int64_t>(row_order->size()) == rows);
    const bool q6 = t == GgmlType::q6_k;
    const int bits = t == GgmlType::q8_0 || t == GgmlType::q5_k || q6 ? 8 : 4;
    WoqLayer layer = allocate_layer(name, rows, cols, bits, kGroup, q6 ? kQ6SubBlock : kGroup);
    const int64_t groups = layer.groups(), blocks = cols / elements, per_block = elements / kGroup;
    const int64_t row_bytes = layer.qweight.size(1), group_bytes = row_bytes / groups;
    uint8_t *q = layer.qweight.data_ptr<uint8_t>();
    float *s = layer.scales.data_ptr<float>(), *z = layer.zeros.data_ptr<float>();
    std::atomic<bool> exact{true};
    at::parallel_for(0, rows, 16, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t from = row_order ? (*row_order)[static_cast<size_t>(r)] : r;
            const uint8_t *row = src + static_cast<uint64_t>(from) * static_cast<uint64_t>(blocks) * block_bytes;
            for (int64_t b = 0; b < blocks; ++b) {
                const uint8_t *block = row + static_cast<uint64_t>(b) * block_bytes;
                const int64_t g = b * per_block;
                uint8_t *dst = q + r * row_bytes + g * group_bytes;
                float *gs = s + r * groups + g, *gz = z + r * groups + g;
                const bool ok = q6         ? convert_q6_k_block(block, dst, group_bytes, gs, gz)
                                : k_quant(t) ? convert_k_block(t, block, dst, group_bytes, gs, gz)
                                             : convert_block(t, block, dst, *gs, *gz);
                if (!ok) exact = false;
            }
        }
    });
    if (!exact) return std::nullopt;
    return layer;
}

}  // namespace ipex::woq
