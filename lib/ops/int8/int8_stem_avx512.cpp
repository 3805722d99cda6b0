// The int8 stem kernel's AVX512-VNNI loops (int8_stem.h). Built with AVX-512 and VNNI code
// generation; run only after stem::available().
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/avx512/math.h"
#include "ops/int8/int8_pool.h"
#include "ops/int8/int8_stem.h"
#include "ops/int8/int8_vnni_avx512.h"

namespace ipex::quant::stem {

namespace {

using vnni::broadcast32;
using vnni::dot_add;

using ops::own_stem::kMaxMr;
using ops::own_stem::kTileChannels;

struct Tile {
    const uint8_t *const *rows;  // kh padded input rows, each at the tile's first pixel's window
    int64_t kh, groups, step;    // groups read in place a row; step: bytes from one output pixel's window to the next
    const uint8_t *tails;        // the merged tail groups' words at the tile's first pixel (Plan::tail_groups)
    int64_t tail_groups, tail_plane;  // bytes from one tail group's words to the next
    const int8_t *weights;       // the tile's packed weights
    const float *scale, *shift;  // the tile's first channel's
    const vnni::Folded *epilogue;
    uint8_t *dst;                // the tile's first pixel, first channel
    int64_t dst_step;            // bytes between output pixels
    int64_t channels;            // the tile's output channels (a tail below 64 only in the last tile)
};

template <int MR, int NR>
void run_tile(const Tile &t) {
    __m512i acc[MR][NR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_si512();
    const int8_t *w = t.weights;
    for (int64_t r = 0; r < t.kh; ++r) {
        const uint8_t *row = t.rows[r];
        for (int64_t g = 0; g < t.groups; ++g, w += NR * 64) {
            __m512i wv[NR];
#pragma GCC unroll 4
            for (int j = 0; j < NR; ++j) wv[j] = _mm512_loadu_si512(w + 64 * j);
#pragma GCC unroll 16
            for (int i = 0; i < MR; ++i) {
                const __m512i a = broadcast32(row + i * t.step + 4 * g);
#pragma GCC unroll 4
                for (int j = 0; j < NR; ++j) dot_add(acc[i][j], a, wv[j]);
            }
        }
    }
    for (int64_t g = 0; g < t.tail_groups; ++g, w += NR * 64) {
        __m512i wv[NR];
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) wv[j] = _mm512_loadu_si512(w + 64 * j);
        const uint8_t *words = t.tails + g * t.tail_plane;
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
            const __m512i a = broadcast32(words + 4 * i);
#pragma GCC unroll 4
            for (int j = 0; j < NR; ++j) dot_add(acc[i][j], a, wv[j]);
        }
    }
    const vnni::EpilogueRegs e(*t.epilogue);
    __m512 scale[NR], shift[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) {
        scale[j] = _mm512_loadu_ps(t.scale + 16 * j);
        shift[j] = _mm512_loadu_ps(t.shift + 16 * j);
    }
    if constexpr (NR == 4) {
        if (t.channels == kTileChannels && e.in_int32) {  // one whole 64-byte store a pixel
            const __m512i lo = vnni::lo_bytes(*t.epilogue);
#pragma GCC unroll 16
            for (int i = 0; i < MR; ++i) {
                uint8_t *out = t.dst + i * t.dst_step;
                _mm512_storeu_si512(out, t.epilogue->out_s8
                                             ? vnni::epilogue64<false, false, false, true>(e, acc[i], scale, shift,
                                                                                           nullptr, lo)
                                             : vnni::epilogue64<false, false, false, false>(e, acc[i], scale, shift,
                                                                                            nullptr, lo));
            }
            return;
        }
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
        uint8_t *out = t.dst + i * t.dst_step;
        __m128i b[NR];
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) {  // no sum: the epilogue reads no summand
            const __m512i a = acc[i][j];
            b[j] = t.epilogue->out_s8 ? vnni::epilogue<false, false, false, true>(e, a, scale[j], shift[j], nullptr)
                                      : vnni::epilogue<false, false, false, false>(e, a, scale[j], shift[j], nullptr);
        }
        if constexpr (NR == 4) {
            if (t.channels == kTileChannels) {  // one whole 64-byte store
                const __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(b[0]), b[1], 1);
                const __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(b[2]), b[3], 1);
                _mm512_storeu_si512(out, _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
                continue;
            }
        }
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) {
            const int64_t left = t.channels - 16 * j;
            if (left >= 16) _mm_storeu_si128(reinterpret_cast<__m128i *>(out + 16 * j), b[j]);
            else _mm_mask_storeu_epi8(out + 16 * j, static_cast<__mmask16>((1u << left) - 1), b[j]);
        }
    }
}

template <int MR, int NR>
struct TileKernel {
    static void run(const Tile &t) { run_tile<MR, NR>(t); }
};
const auto kTiles = ops::own_stem::TileTable<Tile, TileKernel>::table();

// The padded input rows a run of output rows reads, each copied once (fp32 ones quantized): a
// ring of kh rows, each (pad + w + pad) pixels and 64 bytes more (what a kernel row's last group
// reads past its taps).
class RowRing {
public:
    RowRing(const Plan &p, const Source &src, int64_t h, int64_t w, int64_t ow)
        : p_(p), src_(src), h_(h), w_(w), ow_(ow), bytes_((w + 2 * p.pad_w) * p.channels + 64), data_(p.kh * bytes_),
          tail_bytes_((ow + kTailPad) * p.tail_bytes), tails_(p.kh * tail_bytes_), tags_(p.kh, {-1, 0}) {
        const int zp = p.in_zero_point + (p.in_s8 ? 128 : 0);
        fill_ = static_cast<uint8_t>(zp);
    }

    // Row y (input coordinates, may be outside 0..h-1) of image `image`, from pixel -pad_w.
    const uint8_t *row(int64_t image, int64_t y) {
        const int64_t slot = slot_of(y);
        uint8_t *dst = data_.data() + slot * bytes_;
        if (tags_[slot].first == image && tags_[slot].second == y) return dst;
        tags_[slot] = {image, y};
        fill(image, y, dst);
        if (p_.tail_groups) {  // the row's tail bytes of each output pixel's window, in pixel order
            uint8_t *tail = tails_.data() + slot * tail_bytes_;
            const int64_t step = p_.stride_w * p_.channels, at = 4 * p_.row_groups, n = p_.tail_bytes;
            const uint8_t *from = dst + at;
            if (n == 1) {
                for (int64_t x = 0; x < ow_; ++x) tail[x] = from[x * step];
            } else {
                for (int64_t x = 0; x < ow_; ++x) std::memcpy(tail + 2 * x, from + x * step, 2);
            }
        }
        return dst;
    }

    // The tail bytes of row y (row() called for it last): Plan::tail_bytes an output pixel,
    // kTailPad pixels' worth past ow (unset: their words are never read).
    const uint8_t *tails(int64_t y) const { return tails_.data() + slot_of(y) * tail_bytes_; }

    static constexpr int64_t kTailPad = 16;

private:
    int64_t slot_of(int64_t y) const { return ((y % p_.kh) + p_.kh) % p_.kh; }

    void fill(int64_t image, int64_t y, uint8_t *dst) {
        if (y < 0 || y >= h_) {
            std::memset(dst, fill_, bytes_);
            return;
        }
        const int64_t left = p_.pad_w * p_.channels, body = w_ * p_.channels;
        std::memset(dst, fill_, left);
        if (src_.floats && src_.planes) {
            const int64_t plane = h_ * w_;
            const float *at = src_.floats + image * p_.channels * plane + y * w_;
            if (y + kAheadRows < h_)
                for (int64_t c = 0; c < p_.channels; ++c)
                    ::ipex::kernels::avx512::prefetch_floats(at + c * plane + kAheadRows * w_, w_);
            quantize_kernel::planes_to_last_avx512(at, dst + left, p_.channels, plane, 0, w_, src_.quantize);
        } else if (src_.floats) {
            const float *at = src_.floats + (image * h_ + y) * body;
            if (y + kAheadRows < h_) ::ipex::kernels::avx512::prefetch_floats(at + kAheadRows * body, body);
            quantize_kernel::flat_avx512(at, dst + left, body, src_.quantize);
        } else if (!p_.in_s8) {
            std::memcpy(dst + left, src_.bytes + (image * h_ + y) * body, body);
        } else {  // s8 + 128 as u8: flip the sign bit
            const uint8_t *from = src_.bytes + (image * h_ + y) * body;
            int64_t i = 0;
            const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
            for (; i + 64 <= body; i += 64)
                _mm512_storeu_si512(dst + left + i, _mm512_xor_si512(_mm512_loadu_si512(from + i), flip));
            for (; i < body; ++i) dst[left + i] = static_cast<uint8_t>(from[i] ^ 0x80);
        }
        std::memset(dst + left + body, fill_, bytes_ - left - body);
    }

    // fp32 rows are read from memory (a network's input): the row kAheadRows below is asked for
    // when one is quantized, so it is in cache when its turn comes.
    static constexpr int64_t kAheadRows = 4;

    const Plan &p_;
    const Source &src_;
    int64_t h_, w_, ow_, bytes_;
    std::vector<uint8_t> data_;
    int64_t tail_bytes_;
    std::vector<uint8_t> tails_;
    std::vector<std::pair<int64_t, int64_t>> tags_;  // (image, row) each slot holds
    uint8_t fill_ = 0;
};

// A thread's maker of output rows: its ring of input rows and each row's tiles.
class RowMaker {
public:
    RowMaker(const Plan &p, const Source &src, int64_t h, int64_t w, int64_t ow)
        : p_(p), ow_(ow), ring_(p, src, h, w, ow), rows_(p.kh), at_(p.kh),
          plane_(4 * (ow + RowRing::kTailPad)), words_(p.tail_groups * plane_),
          zeros_((ow + RowRing::kTailPad) * p.tail_bytes) {}

    // Output row y of image `image`, written at out_row (ow pixels of out_channels bytes).
    void make(int64_t image, int64_t y, uint8_t *out_row) {
        const Plan &p = p_;
        for (int64_t r = 0; r < p.kh; ++r)
            rows_[r] = ring_.row(image, y * p.stride_h - p.pad_h + r);
        if (p.tail_groups) merge_tails(y * p.stride_h - p.pad_h);
        const int64_t tiles = (p.out_channels + kTileChannels - 1) / kTileChannels;
        const int64_t tile_bytes = p.groups() * kTileChannels * 4;
        for (int64_t t = 0; t < tiles; ++t) {
            const int64_t first = t * kTileChannels;
            const int64_t channels = std::min(kTileChannels, p.out_channels - first);
            const int nr = static_cast<int>((channels + 15) / 16);
            Tile tile{at_.data(), p.kh, p.row_groups, p.stride_w * p.channels, nullptr, p.tail_groups, plane_,
                      p.packed.data_ptr<int8_t>() + t * tile_bytes, p.scale.data() + first,
                      p.shift.data() + first, &p.epilogue, nullptr, p.out_channels, channels};
            const int64_t most = kMaxMr[nr - 1];
            for (int64_t x = 0; x < ow_; x += most) {
                const int mr = static_cast<int>(std::min<int64_t>(most, ow_ - x));
                for (int64_t r = 0; r < p.kh; ++r) at_[r] = rows_[r] + x * tile.step;
                if (p.tail_groups) tile.tails = words_.data() + 4 * x;
                tile.dst = out_row + x * p.out_channels + first;
                kTiles[nr - 1][mr - 1](tile);
            }
        }
    }

private:
    // The merged tail groups' words of every output pixel of the row whose window starts at
    // input row y0: group g's word of pixel x at g x plane_ + 4x, its bytes the tails of rows
    // g x rows_per_tail on (zeros past the kernel's last row), 16 pixels at a time.
    void merge_tails(int64_t y0) {
        const Plan &p = p_;
        const int64_t per = p.rows_per_tail;
        for (int64_t g = 0; g < p.tail_groups; ++g) {
            const uint8_t *s[4];
            for (int64_t k = 0; k < per; ++k) {
                const int64_t r = g * per + k;
                s[k] = r < p.kh ? ring_.tails(y0 + r) : zeros_.data();
            }
            uint8_t *out = words_.data() + g * plane_;
            const auto load = [](const uint8_t *from, int64_t at) {
                return _mm_loadu_si128(reinterpret_cast<const __m128i *>(from + at));
            };
            if (per == 4) {  // a byte of each of 4 rows: 16 pixels from 16 bytes of each
                for (int64_t x = 0; x < ow_; x += 16) {
                    const __m128i a = load(s[0], x), b = load(s[1], x), c = load(s[2], x), d = load(s[3], x);
                    const __m128i ab_lo = _mm_unpacklo_epi8(a, b), ab_hi = _mm_unpackhi_epi8(a, b);
                    const __m128i cd_lo = _mm_unpacklo_epi8(c, d), cd_hi = _mm_unpackhi_epi8(c, d);
                    auto *o = reinterpret_cast<__m128i *>(out + 4 * x);
                    _mm_storeu_si128(o, _mm_unpacklo_epi16(ab_lo, cd_lo));
                    _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(ab_lo, cd_lo));
                    _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(ab_hi, cd_hi));
                    _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(ab_hi, cd_hi));
                }
            } else {  // two bytes of each of 2 rows: 8 pixels from 16 bytes of each
                for (int64_t x = 0; x < ow_; x += 8) {
                    const __m128i a = load(s[0], 2 * x), b = load(s[1], 2 * x);
                    auto *o = reinterpret_cast<__m128i *>(out + 4 * x);
                    _mm_storeu_si128(o, _mm_unpacklo_epi16(a, b));
                    _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(a, b));
                }
            }
        }
    }

    const Plan &p_;
    int64_t ow_;
    RowRing ring_;
    std::vector<const uint8_t *> rows_, at_;  // the kernel rows, and at a tile's first pixel
    int64_t plane_;                           // bytes of one tail group's words
    std::vector<uint8_t> words_, zeros_;  // zeros_: the tails of rows past the kernel's last
};

}  // namespace

void run(const Plan &p, const uint8_t *src, int64_t n, int64_t h, int64_t w, uint8_t *dst, int64_t oh, int64_t ow) {
    // Rows of output a task: enough that the ring's copies (kh rows per stride rows) stay small.
    const int64_t grain = std::max<int64_t>(1, std::min<int64_t>(oh, 8));
    Source bytes;
    bytes.bytes = src;
    at::parallel_for(0, n * oh, grain, [&](int64_t begin, int64_t end) {
        RowMaker maker(p, bytes, h, w, ow);
        for (int64_t index = begin; index < end; ++index)
            maker.make(index / oh, index % oh, dst + index * ow * p.out_channels);
    });
}

void run_max_pooled(const Plan &p, const Source &src, int64_t n, int64_t h, int64_t w, int64_t oh, int64_t ow,
                    const ops::PoolWindow &win, int64_t poh, int64_t pow, uint8_t *dst) {
    const int64_t row_bytes = ow * p.out_channels;
    // The output rows one pooled row reads lie within `span` rows: a ring of span rows holds them.
    const int64_t span = (win.kernel[0] - 1) * win.dilation[0] + 1;
    const bool is_signed = p.epilogue.out_s8;
    // Each thread an equal run of pooled rows (across images); only the output rows two threads'
    // runs share are made twice.
    at::parallel_for(0, n * poh, 1, [&](int64_t begin, int64_t end) {
        RowMaker maker(p, src, h, w, ow);
        std::vector<uint8_t> ring(span * row_bytes);
        std::vector<std::pair<int64_t, int64_t>> held(span, {-1, 0});  // (image, row) each slot holds
        std::vector<const uint8_t *> rows(win.kernel[0]);
        for (int64_t index = begin; index < end; ++index) {
            const int64_t image = index / poh, py = index % poh;
            int64_t count = 0;
            for (int64_t ky = 0; ky < win.kernel[0]; ++ky) {
                const int64_t y = py * win.stride[0] - win.padding[0] + ky * win.dilation[0];
                if (y < 0 || y >= oh) continue;
                const int64_t slot = y % span;
                uint8_t *row = ring.data() + slot * row_bytes;
                if (held[slot] != std::make_pair(image, y)) {
                    maker.make(image, y, row);
                    held[slot] = {image, y};
                }
                rows[count++] = row;
            }
            uint8_t *out = dst + index * pow * p.out_channels;
            max_pool_row(rows.data(), count, ow, p.out_channels, win, pow, is_signed, out);
        }
    });
}

}  // namespace ipex::quant::stem
