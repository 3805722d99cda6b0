// The AVX-512 kernels of ipex::quantize_per_tensor (int8_quantize.h). Built with AVX-512 flags;
// called only where ops::own_kernels::available(false).
#include <immintrin.h>

#include <algorithm>
#include <array>

#include "ops/int8/int8_quantize.h"

namespace ipex::quant::quantize_kernel {
namespace {

// The low byte of each 32-bit lane, kept in a register: a store of it would otherwise fold
// into vpmovdb's memory form, which AMD's cores run several times slower (a masked store of
// 16 quantized bytes took 3.5x the time of the table lookup that made them).
inline __m128i narrow_bytes(__m512i v) {
    __m128i bytes = _mm512_cvtepi32_epi8(v);
    __asm__("" : "+v"(bytes));
    return bytes;
}

// 16 values to 16 integers in [lo, hi] + zero point: multiply, round half to even, clamp (NaN
// to lo: max returns its second operand when the first is NaN), convert.
inline __m128i quantize16(__m512 x, __m512 inv, __m512 lo, __m512 hi, __m512i zp) {
    __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(x, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm512_min_ps(_mm512_max_ps(r, lo), hi);
    const __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(r), zp);
    return narrow_bytes(q);  // in range already: the low byte of each lane
}

}  // namespace

void flat_avx512(const float *src, void *dst, int64_t n, const Params &p) {
    const __m512 inv = _mm512_set1_ps(p.inv_scale), lo = _mm512_set1_ps(p.lo), hi = _mm512_set1_ps(p.hi);
    const __m512i zp = _mm512_set1_epi32(p.zero_point);
    auto *out = static_cast<uint8_t *>(dst);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm_storeu_si128(reinterpret_cast<__m128i *>(out + i), quantize16(_mm512_loadu_ps(src + i), inv, lo, hi, zp));
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        _mm_mask_storeu_epi8(out + i, m, quantize16(_mm512_maskz_loadu_ps(m, src + i), inv, lo, hi, zp));
    }
}

namespace {

// Up to 4 channels (an image's RGB or RGBA planes): 16 pixels of each channel loaded, put in
// channels-last order in c vectors of 16 values by masked permutes (vector k, lane j holds value
// 16k + j: pixel (16k + j) / c of channel (16k + j) % c), each quantized and stored as 16
// contiguous bytes; where the per-channel path stored every byte on its own (ResNet-50's 16
// images: 0.8 ms).
// The permutes' lane indices and per-channel masks for c channels, made once (a stem's rows are
// 224 pixels: the 48 integer divisions that made them cost more than quantizing the row).
struct PlaneOrder {
    alignas(64) int32_t lanes[4][16] = {};
    __mmask16 of_channel[4][4] = {};
};

const PlaneOrder &plane_order(int64_t c) {
    static const auto orders = [] {
        std::array<PlaneOrder, 5> all{};
        for (int64_t n = 1; n <= 4; ++n)
            for (int64_t k = 0; k < n; ++k)
                for (int j = 0; j < 16; ++j) {
                    const int64_t value = 16 * k + j;
                    all[n].lanes[k][j] = static_cast<int32_t>(value / n);
                    all[n].of_channel[k][value % n] |= static_cast<__mmask16>(1u << j);
                }
        return all;
    }();
    return orders[c];
}

void few_planes_to_last(const float *src, uint8_t *out, int64_t c, int64_t plane, int64_t p0, int64_t p1,
                        __m512 inv, __m512 lo, __m512 hi, __m512i zp) {
    const PlaneOrder &order = plane_order(c);
    const auto &of_channel = order.of_channel;
    __m512i index[4];
    for (int64_t k = 0; k < c; ++k) index[k] = _mm512_load_si512(order.lanes[k]);
    __m512 planes[4];
    for (int64_t q = p0; q < p1; q += 16) {
        const int64_t n = p1 - q < 16 ? p1 - q : 16;
        const __mmask16 m = static_cast<__mmask16>(n == 16 ? 0xffffu : (1u << n) - 1u);
        for (int64_t ch = 0; ch < c; ++ch) planes[ch] = _mm512_maskz_loadu_ps(m, src + ch * plane + q);
        uint8_t *row = out + q * c;
        for (int64_t k = 0; k < c; ++k) {
            __m512 v = _mm512_setzero_ps();
            for (int64_t ch = 0; ch < c; ++ch)
                v = _mm512_mask_permutexvar_ps(v, of_channel[k][ch], index[k], planes[ch]);
            const int64_t bytes = n * c - 16 * k;
            if (bytes <= 0) break;
            const __m128i q8 = quantize16(v, inv, lo, hi, zp);
            if (bytes >= 16)
                _mm_storeu_si128(reinterpret_cast<__m128i *>(row + 16 * k), q8);
            else
                _mm_mask_storeu_epi8(row + 16 * k, static_cast<__mmask16>((1u << bytes) - 1u), q8);
        }
    }
}

}  // namespace

void planes_to_last_avx512(const float *src, void *dst, int64_t c, int64_t plane, int64_t p0, int64_t p1,
                           const Params &p) {
    const __m512 inv = _mm512_set1_ps(p.inv_scale), lo = _mm512_set1_ps(p.lo), hi = _mm512_set1_ps(p.hi);
    const __m512i zp = _mm512_set1_epi32(p.zero_point);
    auto *out = static_cast<uint8_t *>(dst);
    if (c <= 4) return few_planes_to_last(src, out, c, plane, p0, p1, inv, lo, hi, zp);
    alignas(16) uint8_t block[16];
    for (int64_t q = p0; q < p1; q += 16) {
        const int64_t k = p1 - q < 16 ? p1 - q : 16;
        const __mmask16 m = static_cast<__mmask16>(k == 16 ? 0xffffu : (1u << k) - 1u);
        for (int64_t ch = 0; ch < c; ++ch) {
            _mm_store_si128(reinterpret_cast<__m128i *>(block),
                            quantize16(_mm512_maskz_loadu_ps(m, src + ch * plane + q), inv, lo, hi, zp));
            for (int64_t j = 0; j < k; ++j) out[(q + j) * c + ch] = block[j];
        }
    }
}

namespace {

// 16 stored bytes to float(q - zero_point) * scale. The integer difference is exact, its
// conversion too (|q - zp| < 2^24): one rounding, in the product.
inline __m512 dequantize16(__m128i bytes, bool is_signed, __m512i zp, __m512 scale) {
    const __m512i q = is_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, zp)), scale);
}

inline __mmask16 first_lanes(int64_t n) {
    return n >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
}

// A masked byte store only for a tail: AMD's cores run it far slower than a plain one (30% of
// the squeeze-excite gate's time was its masked stores).
inline void store16(uint8_t *dst, __mmask16 m, __m128i bytes) {
    if (m == 0xffff)
        _mm_storeu_si128(reinterpret_cast<__m128i *>(dst), bytes);
    else
        _mm_mask_storeu_epi8(dst, m, bytes);
}

}  // namespace

void dequantize_avx512(const void *src, bool is_signed, float *dst, int64_t n, int32_t zero_point, float scale) {
    const auto *in = static_cast<const uint8_t *>(src);
    const __m512i zp = _mm512_set1_epi32(zero_point);
    const __m512 s = _mm512_set1_ps(scale);
    auto value = [&](__m128i bytes) { return dequantize16(bytes, is_signed, zp, s); };
    int64_t i = 0;
    for (; i + 64 <= n; i += 64)
        for (int k = 0; k < 4; ++k)
            _mm512_storeu_ps(dst + i + 16 * k,
                             value(_mm_loadu_si128(reinterpret_cast<const __m128i *>(in + i + 16 * k))));
    for (; i < n; i += 16) {
        const __mmask16 m = first_lanes(n - i);
        _mm512_mask_storeu_ps(dst + i, m, value(_mm_maskz_loadu_epi8(m, in + i)));
    }
}

void scale_shift_avx512(const uint8_t *src, int64_t src_stride, uint8_t *dst, int64_t dst_stride, int64_t pixels,
                        int64_t channels, const ScaleShift &p) {
    const __m512i zp = _mm512_set1_epi32(p.zero_point), out_zp = _mm512_set1_epi32(p.out.zero_point);
    const __m512 s = _mm512_set1_ps(p.scale), inv = _mm512_set1_ps(p.out.inv_scale);
    const __m512 lo = _mm512_set1_ps(p.out.lo), hi = _mm512_set1_ps(p.out.hi), zero = _mm512_setzero_ps();
    for (int64_t px = 0; px < pixels; ++px) {
        for (int64_t c = 0; c < channels; c += 16) {
            const __mmask16 m = first_lanes(channels - c);
            const __m512 x = dequantize16(_mm_maskz_loadu_epi8(m, src + px * src_stride + c), p.is_signed, zp, s);
            // A product and a sum (no fused multiply-add), as the portable loop computes it.
            __m512 y = _mm512_add_ps(_mm512_mul_ps(x, _mm512_maskz_loadu_ps(m, p.channel_scale + c)),
                                     _mm512_maskz_loadu_ps(m, p.channel_shift + c));
            // y second: a NaN stays NaN through the ReLU (as in the portable loop and aten's
            // relu), and quantize16 then gives it the type's lowest value, ReLU or not.
            if (p.relu) y = _mm512_max_ps(zero, y);
            store16(dst + px * dst_stride + c, m, quantize16(y, inv, lo, hi, out_zp));
        }
    }
}

namespace {

// 16 table entries at once (indices 0-255 in 32-bit lanes), with permutes instead of a gather
// (slow on some CPUs): 32-entry permutes by the low 5 bits, blended by bits 5, 6 and 7.
inline __m512i lookup16(__m512i index, const __m512i (&t)[16]) {
    __m512i r[8];
    for (int k = 0; k < 8; ++k) r[k] = _mm512_permutex2var_epi32(t[2 * k], index, t[2 * k + 1]);
    const __mmask16 b5 = _mm512_test_epi32_mask(index, _mm512_set1_epi32(32));
    const __mmask16 b6 = _mm512_test_epi32_mask(index, _mm512_set1_epi32(64));
    const __mmask16 b7 = _mm512_test_epi32_mask(index, _mm512_set1_epi32(128));
    for (int k = 0; k < 4; ++k) r[k] = _mm512_mask_blend_epi32(b5, r[2 * k], r[2 * k + 1]);
    for (int k = 0; k < 2; ++k) r[k] = _mm512_mask_blend_epi32(b6, r[2 * k], r[2 * k + 1]);
    return _mm512_mask_blend_epi32(b7, r[0], r[1]);
}

// 64 bytes at once with AVX512-VBMI's byte permutes: 128-entry lookups by the low 7 bits,
// blended by bit 7.
[[gnu::target("avx512vbmi")]] void map_bytes_vbmi(const uint8_t *src, const uint8_t *table, uint8_t *dst,
                                                   int64_t n) {
    __m512i t[4];
    for (int k = 0; k < 4; ++k) t[k] = _mm512_loadu_si512(table + 64 * k);
    // A loop, not a lambda: a lambda would not inherit the target attribute.
    for (int64_t i = 0; i < n; i += 64) {
        const __mmask64 m = n - i >= 64 ? ~__mmask64(0) : (__mmask64(1) << (n - i)) - 1;
        const __m512i index = _mm512_maskz_loadu_epi8(m, src + i);
        const __m512i lo = _mm512_permutex2var_epi8(t[0], index, t[1]);
        const __m512i hi = _mm512_permutex2var_epi8(t[2], index, t[3]);
        const __m512i bytes = _mm512_mask_blend_epi8(_mm512_movepi8_mask(index), lo, hi);
        if (n - i >= 64)
            _mm512_storeu_si512(dst + i, bytes);
        else
            _mm512_mask_storeu_epi8(dst + i, m, bytes);
    }
}

// A table's word planes (word_planes) in registers, for 64 lookups at once with VBMI's byte
// permutes.
struct WordPlanes {
    __m512i plane[4][4];  // [byte][64-entry quarter]
    __m512i order;        // the index order that makes the unpacks below give words in order

    WordPlanes() = default;
    explicit WordPlanes(const uint8_t *planes) {
        for (int k = 0; k < 4; ++k)
            for (int q = 0; q < 4; ++q) plane[k][q] = _mm512_loadu_si512(planes + 256 * k + 64 * q);
        // The unpacks put the byte at position 16 L + 4 m + d in word d of 128-bit lane L of
        // output m; value 16 m + 4 L + d belongs there.
        alignas(64) uint8_t lanes[64];
        for (int l = 0; l < 4; ++l)
            for (int m = 0; m < 4; ++m)
                for (int d = 0; d < 4; ++d) lanes[16 * l + 4 * m + d] = static_cast<uint8_t>(16 * m + 4 * l + d);
        order = _mm512_load_si512(lanes);
    }
};

// The words of 64 byte indices, in order: out[m] holds those of bytes 16 m .. 16 m + 15.
[[gnu::target("avx512vbmi")]] inline void lookup64(const WordPlanes &t, __m512i index, __m512i (&out)[4]) {
    index = _mm512_permutexvar_epi8(t.order, index);
    const __mmask64 high = _mm512_movepi8_mask(index);
    __m512i r[4];
    for (int k = 0; k < 4; ++k)
        r[k] = _mm512_mask_blend_epi8(high, _mm512_permutex2var_epi8(t.plane[k][0], index, t.plane[k][1]),
                                      _mm512_permutex2var_epi8(t.plane[k][2], index, t.plane[k][3]));
    const __m512i lo01 = _mm512_unpacklo_epi8(r[0], r[1]), hi01 = _mm512_unpackhi_epi8(r[0], r[1]);
    const __m512i lo23 = _mm512_unpacklo_epi8(r[2], r[3]), hi23 = _mm512_unpackhi_epi8(r[2], r[3]);
    out[0] = _mm512_unpacklo_epi16(lo01, lo23);
    out[1] = _mm512_unpackhi_epi16(lo01, lo23);
    out[2] = _mm512_unpacklo_epi16(hi01, hi23);
    out[3] = _mm512_unpackhi_epi16(hi01, hi23);
}

inline __mmask64 first_bytes(int64_t n) { return n >= 64 ? ~__mmask64(0) : (__mmask64(1) << n) - 1; }

// dst[i] = table[src[i]] (32-bit words), 64 at a time.
[[gnu::target("avx512vbmi")]] void map_words_vbmi(const WordPlanes &t, const uint8_t *src, int32_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i += 64) {
        __m512i words[4];
        lookup64(t, _mm512_maskz_loadu_epi8(first_bytes(n - i), src + i), words);
        for (int m = 0; m < 4; ++m) {
            const int64_t left = n - i - 16 * m;
            if (left >= 16)
                _mm512_storeu_si512(dst + i + 16 * m, words[m]);
            else if (left > 0)
                _mm512_mask_storeu_epi32(dst + i + 16 * m, first_lanes(left), words[m]);
        }
    }
}

// map_channel_sums_avx512 with a table, 64 channels looked up at once.
[[gnu::target("avx512vbmi")]] void channel_sums_vbmi(const uint8_t *src, int64_t stride, int64_t pixels,
                                                      int64_t channels, const WordPlanes &t, float *sums) {
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    const __mmask64 m = first_bytes(channels);
    for (int64_t p = 0; p < pixels; ++p) {
        __m512i words[4];
        lookup64(t, _mm512_maskz_loadu_epi8(m, src + p * stride), words);
        for (int k = 0; k < 4; ++k) acc[k] = _mm512_add_ps(acc[k], _mm512_castsi512_ps(words[k]));
    }
    for (int k = 0; 16 * k < channels; ++k)
        _mm512_mask_storeu_ps(sums + 16 * k, first_lanes(channels - 16 * k), acc[k]);
}

bool has_vbmi() { return __builtin_cpu_supports("avx512vbmi"); }

// The planes of `values`' table in registers: the caller's, or made here.
WordPlanes planes_of(const ByteValues &values) {
    if (values.planes) return WordPlanes(values.planes);
    uint8_t planes[4 * 256];
    word_planes(values.table, planes);
    return WordPlanes(planes);
}

}  // namespace

void map_avx512(const uint8_t *src, const int32_t *table, void *dst, int64_t n, bool bytes_out, bool vbmi) {
    if (bytes_out && vbmi && has_vbmi()) {
        uint8_t bytes[256];
        for (int i = 0; i < 256; ++i) bytes[i] = static_cast<uint8_t>(table[i]);
        return map_bytes_vbmi(src, bytes, static_cast<uint8_t *>(dst), n);
    }
    if (!bytes_out && vbmi && has_vbmi()) {
        ByteValues values;
        values.table = table;
        return map_words_vbmi(planes_of(values), src, static_cast<int32_t *>(dst), n);
    }
    __m512i t[16];
    for (int k = 0; k < 16; ++k) t[k] = _mm512_loadu_si512(table + 16 * k);
    auto sixteen = [&](int64_t i, __mmask16 m) {
        const __m512i v = lookup16(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, src + i)), t);
        if (bytes_out)
            store16(static_cast<uint8_t *>(dst) + i, m, narrow_bytes(v));
        else if (m == 0xffff)
            _mm512_storeu_si512(static_cast<int32_t *>(dst) + i, v);
        else
            _mm512_mask_storeu_epi32(static_cast<int32_t *>(dst) + i, m, v);
    };
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) sixteen(i, static_cast<__mmask16>(0xffff));
    if (i < n) sixteen(i, first_lanes(n - i));
}

namespace {

// The fp32 values of 16 bytes, looked up in a table held in t or computed as a dequantize.
struct Values16 {
    __m512i t[16];
    __m512i zp;
    __m512 scale;
    bool affine, is_signed;

    explicit Values16(const ByteValues &v)
        : zp(_mm512_set1_epi32(v.zero_point)), scale(_mm512_set1_ps(v.scale)), affine(v.affine),
          is_signed(v.is_signed) {
        for (int k = 0; k < 16; ++k) t[k] = affine ? _mm512_setzero_si512() : _mm512_loadu_si512(v.table + 16 * k);
    }
    __m512 operator()(__m128i bytes) const {
        if (affine) return dequantize16(bytes, is_signed, zp, scale);
        return _mm512_castsi512_ps(lookup16(_mm512_cvtepu8_epi32(bytes), t));
    }
};

}  // namespace

void map_channel_sums_avx512(const uint8_t *src, int64_t stride, int64_t pixels, int64_t channels,
                             const ByteValues &values, float *sums, bool vbmi) {
    if (!values.affine && vbmi && has_vbmi())
        return channel_sums_vbmi(src, stride, pixels, channels, planes_of(values), sums);
    const Values16 value(values);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    const int64_t vectors = (channels + 15) / 16;
    const __mmask16 last = first_lanes(channels - 16 * (vectors - 1));
    for (int64_t p = 0; p < pixels; ++p) {
        const uint8_t *row = src + p * stride;
        for (int64_t k = 0; k < vectors; ++k) {
            const __mmask16 m = k + 1 == vectors ? last : static_cast<__mmask16>(0xffff);
            acc[k] = _mm512_add_ps(acc[k], value(_mm_maskz_loadu_epi8(m, row + 16 * k)));
        }
    }
    for (int64_t k = 0; k < vectors; ++k)
        _mm512_mask_storeu_ps(sums + 16 * k, k + 1 == vectors ? last : static_cast<__mmask16>(0xffff), acc[k]);
}

void map_gate_avx512(const uint8_t *src, uint8_t *dst, int64_t n, int64_t channels, const float *gate,
                     const ByteValues &values, const Params &out, bool vbmi) {
    const __m512 inv = _mm512_set1_ps(out.inv_scale), lo = _mm512_set1_ps(out.lo), hi = _mm512_set1_ps(out.hi);
    const __m512i zp = _mm512_set1_epi32(out.zero_point);
    // Values i0 .. i0 + len, one gate for each channel's run: value(k) the fp32 value of byte k.
    auto gated = [&](int64_t i0, int64_t len, auto &&value) {
        int64_t c = channels ? i0 % channels : 0;  // the channel of value i
        for (int64_t i = i0; i < i0 + len; c = 0) {
            const int64_t run = channels ? std::min(channels - c, i0 + len - i) : len;
            for (int64_t k = 0; k < run; k += 16) {
                const __mmask16 m = first_lanes(run - k);
                const __m512 g = channels ? _mm512_maskz_loadu_ps(m, gate + c + k) : _mm512_set1_ps(*gate);
                store16(dst + i + k, m, quantize16(_mm512_mul_ps(value(i + k, m), g), inv, lo, hi, zp));
            }
            i += run;
        }
    };
    if (values.affine) {
        const Values16 value(values);
        return gated(0, n, [&](int64_t k, __mmask16 m) { return value(_mm_maskz_loadu_epi8(m, src + k)); });
    }
    // A table: looked up a block at a time first (the table's vectors and the quantize's
    // constants do not fit the registers together).
    constexpr int64_t kBlock = 1024;
    alignas(64) float block[kBlock];
    const bool planes = vbmi && has_vbmi();
    const WordPlanes t = planes ? planes_of(values) : WordPlanes{};
    for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
        const int64_t len = std::min(kBlock, n - i0);
        if (planes)
            map_words_vbmi(t, src + i0, reinterpret_cast<int32_t *>(block), len);
        else
            map_avx512(src + i0, values.table, block, len, false, false);
        gated(i0, len, [&](int64_t k, __mmask16 m) { return _mm512_maskz_loadu_ps(m, block + (k - i0)); });
    }
}

}  // namespace ipex::quant::quantize_kernel
