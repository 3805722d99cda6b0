// What the own int8 convolution kernels (int8_stem.h, int8_pointwise.h) share: the VNNI dot
// product, the 4-byte broadcast, and the epilogue that turns 16 int32 sums into 16 output bytes
// as oneDNN's int8 convolutions do. Included only by sources built with AVX-512 and VNNI code
// generation.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "ops/int8/int8_epilogue.h"

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
    __m512 add_after_relu, sum_scale, lo, hi;
    bool in_int32;
    explicit EpilogueRegs(const Folded &f)
        : add_after_relu(_mm512_set1_ps(f.add_after_relu)), sum_scale(_mm512_set1_ps(f.sum_scale)),
          lo(_mm512_set1_ps(f.lo)), hi(_mm512_set1_ps(f.out_s8 ? 127.f : 255.f)), in_int32(f.in_int32) {}
};

// y of the folded epilogue before the bounds: the scale and shift, [relu, + add_after_relu],
// [+ sum_scale x the summand's byte]. y is NaN only where a channel's scale or shift is (the
// sums are integers). The output is a byte, which has no NaN; these kernels give what oneDNN's
// int8 convolutions give: the ReLU before a sum takes a NaN y to 0 (max's second operand), so
// the output is the summand's part alone; any other NaN reaches the bounds, where max(y, lo)
// gives lo (the type's lowest value, or the zero point after a last ReLU), and epilogue64's
// conversion gives the integer indefinite, packed to the lowest value, then lo.
template <bool kSum, bool kReluBeforeSum, bool kSummandS8>
inline __m512 scaled(const EpilogueRegs &e, __m512i acc, __m512 scale, __m512 shift, const uint8_t *summand) {
    __m512 y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), scale, shift);
    if constexpr (kSum) {
        if constexpr (kReluBeforeSum) y = _mm512_add_ps(_mm512_max_ps(y, _mm512_setzero_ps()), e.add_after_relu);
        const __m128i r = _mm_loadu_si128(reinterpret_cast<const __m128i *>(summand));
        const __m512i wide = kSummandS8 ? _mm512_cvtepi8_epi32(r) : _mm512_cvtepu8_epi32(r);
        y = _mm512_fmadd_ps(_mm512_cvtepi32_ps(wide), e.sum_scale, y);
    }
    return y;
}

// 16 outputs of the folded epilogue (Folded): the products and sums in fp32, one rounding to
// nearest even (MXCSR's default), the bounds applied in fp32 (the upper one only where y may
// pass 2^31; the saturating narrowing gives it otherwise). The bytes stay in a register (the asm
// statement): GCC would otherwise fold the narrowing into a VPMOV*DB to memory, which runs several
// times slower on some CPUs than a store.
template <bool kSum, bool kReluBeforeSum, bool kSummandS8, bool kOutS8>
inline __m128i epilogue(const EpilogueRegs &e, __m512i acc, __m512 scale, __m512 shift, const uint8_t *summand) {
    __m512 y = _mm512_max_ps(scaled<kSum, kReluBeforeSum, kSummandS8>(e, acc, scale, shift, summand), e.lo);
    if (!e.in_int32) y = _mm512_min_ps(y, e.hi);
    const __m512i v = _mm512_cvtps_epi32(y);
    __m128i bytes = kOutS8 ? _mm512_cvtsepi32_epi8(v) : _mm512_cvtusepi32_epi8(v);
    asm("" : "+v"(bytes));
    return bytes;
}

// 64 outputs (four blocks of 16 channels of one pixel) of the folded epilogue where
// Folded::in_int32 holds, as epilogue() computes them with fewer instructions (each one here
// takes an issue slot the dot products need): y rounded to int32, the four vectors narrowed by
// the saturating packs (int32 -> int16 -> 8 bits, which saturate as one step would), the lower
// bound taken on the bytes (max(round(y), lo) = round(max(y, lo)) for an integer lo) and the
// packs' lane interleave undone by one permute. summand: the pixel's 64 summand bytes.
template <bool kSum, bool kReluBeforeSum, bool kSummandS8, bool kOutS8>
inline __m512i epilogue64(const EpilogueRegs &e, const __m512i *acc, const __m512 *scale, const __m512 *shift,
                          const uint8_t *summand, __m512i lo_bytes) {
    __m512i v[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
        const uint8_t *block = nullptr;  // no summand without a sum (nor an offset from null)
        if constexpr (kSum) block = summand + 16 * j;
        v[j] = _mm512_cvtps_epi32(scaled<kSum, kReluBeforeSum, kSummandS8>(e, acc[j], scale[j], shift[j], block));
    }
    const __m512i words01 = _mm512_packs_epi32(v[0], v[1]), words23 = _mm512_packs_epi32(v[2], v[3]);
    // Lane l of the packed bytes holds dwords l (block 0), l (block 1) ...: put the blocks back in order.
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    if constexpr (kOutS8)
        return _mm512_permutexvar_epi32(order, _mm512_max_epi8(_mm512_packs_epi16(words01, words23), lo_bytes));
    else
        return _mm512_permutexvar_epi32(order, _mm512_max_epu8(_mm512_packus_epi16(words01, words23), lo_bytes));
}

// Folded::lo in every byte, as epilogue64 takes it.
inline __m512i lo_bytes(const Folded &f) { return _mm512_set1_epi8(static_cast<char>(static_cast<int>(f.lo))); }

}  // namespace ipex::quant::vnni
