// bf16 <-> fp32 of one value, for the portable kernels and the layouts the vector kernels read
// (the vector forms are in kernels/avx512/math.h). Header-only, torch-free.
#pragma once

#include <cstdint>
#include <cstring>

namespace ipex::kernels {

// f rounded to bf16 (nearest even), as at::BFloat16 rounds; a NaN keeps its sign and becomes
// quiet (its top payload bit set).
inline uint16_t to_bf16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
}

// The bf16 bits b as fp32, exactly.
inline float from_bf16(uint16_t b) {
    const uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

}  // namespace ipex::kernels
