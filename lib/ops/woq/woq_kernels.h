// Inner kernels of ipex::woq_linear on raw pointers (no libtorch types, so that the AVX-512
// translation unit holds nothing but its own code). Weights are in the layout of
// woq_layout.h; every kernel handles output channels [n_begin, n_end) for all rows of x.
#pragma once

#include <cstdint>

namespace ipex::woq::kernels {

struct WeightView {
    const uint8_t *qweight;   // [N, row_bytes]
    const float *scales;      // [N, groups]
    const float *zeros;       // [N, groups]
    int64_t n = 0;            // output channels
    int64_t k = 0;            // input channels
    int64_t kp = 0;           // padded input channels (multiple of 32)
    int64_t groups = 0;
    int64_t group_size = 0;
    int bits = 4;

    int64_t row_bytes() const { return bits == 4 ? kp / 2 : kp; }
    // Groups that span whole 32-channel blocks (what the vector kernels need).
    bool block_aligned() const { return groups == 1 || group_size % 32 == 0; }
};

// out[m, n] = sum_k x[m, k] W[n, k] for fp32 activations x [m, kp] (zero padded) whose group
// sums (over the real channels) are xsum [m, groups]. out has row stride ldo.
struct GemvF32 {
    const float *x;
    const float *xsum;
    int64_t m;
    float *out;
    int64_t ldo;
};

// The same with activations quantized per row: x ~ xq [m, kp] (int8, zero padded) * xscale[m],
// xsum [m, groups] the int32 group sums of xq.
struct GemvS8 {
    const int8_t *xq;
    const float *xscale;
    const int32_t *xsum;
    int64_t m;
    float *out;
    int64_t ldo;
};

// Activations quantized per row for GemvS8, from x [m, k] fp32 (contiguous):
// xscale[i] = max|x[i]| / 127 (1 for a row of zeros), xq[i] [kp] = round-half-even(x[i] /
// xscale[i]) (zero padded), xsum[i] [k / group_size] the int32 group sums of xq[i].
struct QuantizeS8 {
    const float *x;
    int64_t m, k, kp, group_size;
    int8_t *xq;
    float *xscale;
    int32_t *xsum;
};

// bf16 activations: x [m, kp] as bf16 bits (zero padded), xsum [m, groups] their group sums.
// paired: x is in pair order (see bf16_pair_order) and the weights allow it.
struct GemvBF16 {
    const uint16_t *x;
    const float *xsum;
    int64_t m;
    float *out;
    int64_t ldo;
    bool paired = false;
};

// The pair order of the bf16 kernel: per 64 input channels (two blocks), channel
// blk*32 + q*8 + e (q = 0..3) goes to (q % 2)*32 + (q / 2)*16 + blk*8 + e, the order in which
// byte unpacking yields the weights. Usable when every group spans whole pairs.
inline bool bf16_pair_order(const WeightView &w) {
    return w.bits == 4 && (w.groups == 1 ? w.kp % 64 == 0 : w.group_size % 64 == 0);
}

// Large batches in bf16: xp holds x [m, kp] as bf16 channel pairs transposed, [kp/2][mp]
// 32-bit words (word p of row i = channels 2p, 2p+1), mp = m rounded up to 16, padding rows
// and channels zero. out [m, n] with row stride ldo.
// exact (when gemm_exact_weights(w)): int4 weights enter the products as the exact bf16
// values 128 + q with the scale applied per group to the fp32 sums and the zero point
// through the group sums of x: y = sum_g s (dot_g - (zero + 128) xsum_g). x is then in pair
// order (bf16_pair_order) and xsum holds the group sums of the bf16 x transposed,
// [groups][mp]. Otherwise the weights are dequantized to bf16((q - zero) * scale).
struct GemmBF16 {
    const uint32_t *xp;
    int64_t m;
    int64_t mp;
    float *out;
    int64_t ldo;
    bool exact = false;
    const float *xsum = nullptr;
};

inline bool gemm_exact_weights(const WeightView &w) { return bf16_pair_order(w); }

// Output channels per panel of gemm_bf16_avx512 (a multiple of its register tiles); callers
// split the output channels in multiples of it.
constexpr int64_t kGemmPanelRows = 56;

inline int64_t gemm_padded_rows(int64_t m) { return (m + 15) / 16 * 16; }

// Rows past whole blocks of 16 would cost the large-batch kernels a padded block; up to this
// many of them go through the small-batch kernel of the same weights instead (the paired int4
// GEMV, or the tiled layout's decode kernel), which reads the weights once more (Zen 4,
// 4096->11008 at batch 17: 9.2 + 2.3 ms instead of 15.3 ms on one thread).
constexpr int64_t kGemmTailRows = 4;

// The tiled int4 layout (the one copy of an int4 LLM projection, built by lib/llm's
// Int4Decode): tiles of kTiledRows output channels one after another; inside a tile the
// 64-byte units (kTiledUnit input channels) of its rows alternate, [tile][unit][row][64 bytes].
// Byte j of a unit holds channel c(j) in its low nibble and 64 + c(j) in its high one, with
// c(j) = 8 (j / 16) + j % 16 for j % 16 < 8, else 32 + 8 (j / 16) + j % 16 - 8: the order in
// which bytewise unpacking yields them, so unpacked words come out in channel order. Codes q
// are unsigned (0..15), the weight scale * (q - zero); scales and zeros are IEEE fp16 bits,
// [tile][group][row] (4 bytes a group and row instead of 8: at groups of 32 the bytes a decode
// step reads drop from 0.75 to 0.625 per weight). Kernels widen them (VCVTPH2PS) and form the
// offset scale * (zero + 128) in fp32 (the decode kernel takes the 128 of its unpacked words
// and the zero point off together). Rows past n in the last tile are zero.
constexpr int64_t kTiledRows = 8;
constexpr int64_t kTiledUnit = 128;
struct TiledInt4View {
    const uint8_t *data;
    const uint16_t *scales;  // fp16
    const uint16_t *zeros;   // fp16
    int64_t n = 0, k = 0;  // k a multiple of kTiledUnit
    int64_t groups = 0, group_size = 0;
    // Every zero point an integer z with q - z in int8's range (-112 <= z <= 127): the int8
    // kernel then needs no term for the zero point's fraction.
    bool integer_zeros = false;
};
inline bool tiled_exact(const TiledInt4View &w) { return w.group_size >= kTiledUnit; }

// Int8 activations for the tiled layout (the W4A8 path of lowp_mode "int8"): each row of x is
// quantized per unit of kTiledUnit channels, x ~ xscale * xq with xscale = max|x| / 127 and
// xq = round-half-even(x * (127 / max|x|)) in -127..127 (0 and xscale 0 for a unit of zeros).
// A piece is min(group_size, kTiledUnit) channels: the span over which both scales hold.
inline int64_t tiled_piece(const TiledInt4View &w) { return w.group_size < kTiledUnit ? w.group_size : kTiledUnit; }

// Packs x [m, k] (fp32 or bf16 bits, contiguous; one of the two pointers set) for
// gemm_s8_tiled_avx512vnni: xq [k/4][mp] words, each the bytes xq + 128 of four consecutive
// channels of one row; xscale [k/kTiledUnit][mp]; xsum [k/piece][mp] the sums of xq over each
// piece, written only when `sums` (the kernel reads them for fractional zero points alone).
// Rows m..mp are zero (xscale 0). Blocks of 16 rows [b0, b1).
struct QuantizeTiledS8 {
    const float *xf = nullptr;
    const uint16_t *xb = nullptr;
    int64_t m = 0, k = 0, piece = 0, mp = 0;
    bool sums = true;
    uint32_t *xq = nullptr;
    float *xscale = nullptr, *xsum = nullptr;
};
void quantize_tiled_s8_avx512(const QuantizeTiledS8 &q, int64_t b0, int64_t b1);

// out [m, n] (row stride ldo) = x W^T from the packed x above: per piece the int8 dot products
// (VPDPBUSD) of xq + 128 with the weights q - z' (z' the zero point rounded to an integer),
// scaled by the weight's scale; the 128 taken off through the weights' piece sums and z - z'
// through the piece sums of xq; per unit scaled by xscale. Exact up to fp32 rounding of those
// few terms for the quantized x. Needs isa::avx512_vnni(); n_begin a multiple of kTiledRows;
// scratch of gemm_s8_tiled_scratch_bytes(k) bytes per concurrent call.
struct GemmS8Tiled {
    const uint32_t *xq;
    const float *xscale, *xsum;
    int64_t m, mp;
    float *out;
    int64_t ldo;
};
// Output channels per panel of gemm_s8_tiled_avx512vnni (callers split in multiples of it).
constexpr int64_t kGemmS8PanelRows = 48;
int64_t gemm_s8_tiled_scratch_bytes(int64_t k);
void gemm_s8_tiled_avx512vnni(const TiledInt4View &w, const GemmS8Tiled &a, int64_t n_begin, int64_t n_end,
                              void *scratch);

// Portable versions: any group size.
void gemv_f32_ref(const WeightView &w, const GemvF32 &a, int64_t n_begin, int64_t n_end);
void gemv_s8_ref(const WeightView &w, const GemvS8 &a, int64_t n_begin, int64_t n_end);
// Rows n_begin..n_end dequantized (fp32, or bf16 bits): row n at dst + (n - n_begin) * ld,
// K columns.
void quantize_s8_ref(const QuantizeS8 &q);
void dequant_f32_ref(const WeightView &w, float *dst, int64_t ld, int64_t n_begin, int64_t n_end);
void dequant_bf16_ref(const WeightView &w, uint16_t *dst, int64_t ld, int64_t n_begin, int64_t n_end);

// AVX2 + FMA versions (need w.block_aligned()); call only when isa::avx2_fma(). For CPUs
// without AVX-512: fp32 and int8 activations (VPMADDUBSW for int4 weights), and the fp32
// dequantization of the large-batch path (the same values as dequant_f32_ref, bit for bit).
void gemv_f32_avx2(const WeightView &w, const GemvF32 &a, int64_t n_begin, int64_t n_end);
void gemv_s8_avx2(const WeightView &w, const GemvS8 &a, int64_t n_begin, int64_t n_end);
void dequant_f32_avx2(const WeightView &w, float *dst, int64_t ld, int64_t n_begin, int64_t n_end);
// The same values as quantize_s8_ref, bit for bit.
void quantize_s8_avx2(const QuantizeS8 &q);

// AVX-512 versions (need w.block_aligned()); call only when isa::avx512() (base/isa.h), and
// isa::avx512_vnni() / isa::avx512_bf16() where they say so. Where the CPU has AMX-BF16
// (isa::amx_bf16_present()) oneDNN's bf16 matmul (AMX tiles) beats gemm_bf16_avx512 on large
// batches, so the dequantize+matmul path is kept.
// fp32: one x row as a dot product per weight row; several rows in tiles that reuse each
// converted weight block for four rows of x.
void gemv_f32_avx512(const WeightView &w, const GemvF32 &a, int64_t n_begin, int64_t n_end);
void gemv_s8_avx512vnni(const WeightView &w, const GemvS8 &a, int64_t n_begin, int64_t n_end);
// int4 weights only; needs isa::avx512_bf16(). Nibbles become bf16 through a lookup, VDPBF16PS.
void gemv_bf16_avx512(const WeightView &w, const GemvBF16 &a, int64_t n_begin, int64_t n_end);
// Expands chunks of weight rows to bf16 in cache (exactly or dequantized, see GemmBF16) and
// multiplies them with every row of x at once (VDPBF16PS); int4 and int8; needs
// isa::avx512_bf16() and w.block_aligned() (woq_gemm_avx512.cpp).
void gemm_bf16_avx512(const WeightView &w, const GemmBF16 &a, int64_t n_begin, int64_t n_end);
// The same for the tiled int4 layout (x in channel order, not pair order; n_begin a multiple
// of kTiledRows). Groups of 128 channels or more exactly when tiled_exact(w) (a.xsum [groups][mp]
// the group sums of the bf16 x): y = sum_g (s dot_g - offset xsum_g) over the words 128 + q;
// groups of 32 or 64 as bf16(fp32(s (q + 128) - offset)), the weight rounded to bf16 (a pass per
// group of 32 cost 13% more than the rounding on Zen 4, of 64 9%).
void gemm_bf16_tiled_avx512(const TiledInt4View &w, const GemmBF16 &a, int64_t n_begin, int64_t n_end);
void dequant_f32_avx512(const WeightView &w, float *dst, int64_t ld, int64_t n_begin, int64_t n_end);
void dequant_bf16_avx512(const WeightView &w, uint16_t *dst, int64_t ld, int64_t n_begin, int64_t n_end);

}  // namespace ipex::woq::kernels
