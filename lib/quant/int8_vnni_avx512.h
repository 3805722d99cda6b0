// What the own int8 convolution kernels (int8_stem.h, int8_pointwise.h) share: the VNNI dot
// product, the 4-byte broadcast, and the epilogue that turns 16 int32 sums into 16 output bytes
// as oneDNN's int8 convolutions do. Included only by sources built with AVX-512 and VNNI code
// generation.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/int8_epilogue.h"

namespace ipex::quant::vnni {

// acc += the dot products of a's u8 and w's s8 quadruples. An asm statement: GCC 12 copies the
// accumulator before each _mm512_dpbusd_epi32 and spills a 6 x 4 tile of them to the stack.
inline void dot_add(__m512i &acc, __m512i a, __m512i w) {
    asm("vpdpbusd %[w], %[a], %[acc]" : [acc] "+v"(acc) : [a] "v"(a), [w] "v"(w));
}

inline __m512i broadcast32(const uint8_t *p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

// The folded epilogue's constants in registers, made once a tile.
struct EpilogueRegs {
    __m512 add_after_relu, sum_scale, lo;
    explicit EpilogueRegs(const Folded &f)
        : add_after_relu(_mm512_set1_ps(f.add_after_relu)), sum_scale(_mm512_set1_ps(f.sum_scale)),
          lo(_mm512_set1_ps(f.lo)) {}
};

// 16 outputs of the folded epilogue (Folded): the products and sums in fp32, one rounding to
// nearest even (MXCSR's default), the lower bound applied in fp32 and the upper one by the
// saturating narrowing (Folded::lo is at least the type's lowest value). The bytes stay in a
// register (the asm statement): GCC would otherwise fold the narrowing into a VPMOV*DB to
// memory, which runs several times slower on some CPUs than a store.
template <bool kSum, bool kReluBeforeSum, bool kSummandS8, bool kOutS8>
inline __m128i epilogue(const EpilogueRegs &e, __m512i acc, __m512 scale, __m512 shift, const uint8_t *summand) {
    __m512 y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), scale, shift);
    if constexpr (kSum) {
        if constexpr (kReluBeforeSum) y = _mm512_add_ps(_mm512_max_ps(y, _mm512_setzero_ps()), e.add_after_relu);
        const __m128i r = _mm_loadu_si128(reinterpret_cast<const __m128i *>(summand));
        const __m512i wide = kSummandS8 ? _mm512_cvtepi8_epi32(r) : _mm512_cvtepu8_epi32(r);
        y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(wide), e.sum_scale, y);
    }
    const __m512i v = _mm512_cvtps_epi32(_mm512_max_ps(y, e.lo));
    __m128i bytes = kOutS8 ? _mm512_cvtsepi32_epi8(v) : _mm512_cvtusepi32_epi8(v);
    asm("" : "+v"(bytes));
    return bytes;
}

}  // namespace ipex::quant::vnni
