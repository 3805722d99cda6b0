// An int4 projection in the tiled layout (ops/woq/woq_kernels.h's TiledInt4View): tiles of
// kTileRows output channels one after another, inside a tile the 64-byte units (128 input
// channels) of its rows alternating, so the decode kernel reads one sequential stream and
// unpacks each byte once for all its rows. Byte j = 16 lane + i of a unit holds channel
// 8 lane + i (i < 8) or 32 + 8 lane + (i - 8) in its low nibble and that channel + 64 in its
// high nibble: the order in which the kernel's bytewise unpack (low, then high half of each
// 128-bit lane) meets them, so that x is read in natural order. Values are the unsigned codes q (0..15); the
// weight is scale * (q - zero), as in lib/woq, with scale and zero held in fp16 (rounded to
// nearest: within 2^-11 of the scale, exact where the checkpoint stored fp16 scales as GPTQ,
// AWQ and GGUF do; a layer with a scale outside fp16's normal range or a zero point beyond
// +-1024 keeps the lib/woq form). Steps of up to kMaxRows rows (decode) run the
// kernel below; more rows (prefill) run lib/woq's large-batch bf16 kernel on the same bytes,
// so this is the projection's one copy (llm::Linear drops the lib/woq layer it was built
// from). Built at load where the CPU has AVX512-BF16 and the layer allows it (no act-order;
// groups of 32, 64 or a multiple of 128 channels, dividing the input channels).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "checkpoint/woq_format.h"
#include "ops/woq/woq_kernels.h"

namespace ipex::llm {

namespace kernels {
struct Int4DecodeArgs;
}

class Int4Decode {
public:
    static constexpr int64_t kTileRows = 8;
    static constexpr int64_t kUnit = 128;  // input channels per 64-byte unit
    static constexpr int64_t kMaxRows = 8;  // rows the decode kernel takes in one pass
    // Rows past whole blocks of 16 up to this many go through the decode kernel (lib/woq's rule).
    static constexpr int64_t kGemmTailRows = woq::kernels::kGemmTailRows;

    // nullptr where the layer or the CPU does not allow this form. int8_activations (lowp_mode
    // "int8", needs AVX-512 VNNI): prefill multiplies x quantized to int8 per row and unit
    // (woq::tiled_int4_gemm_s8); decode steps, bound by the weights' bytes, keep bf16 x.
    static std::unique_ptr<Int4Decode> build(const woq::WoqLayer &layer, bool int8_activations = false);
    // Dense weights [N_i, K] (parts stacked along N; bf16, fp16 or fp32, any other dtype
    // converted) quantized round-to-nearest with groups of group_size (-1: one per output
    // channel) straight into this layout: the same bytes as
    // build(woq::quantize_rtn(cat(parts), 4, group_size)) without the lib/woq layer, the
    // concatenation or their temporaries (a tile of rows at a time, in parallel). nullptr where
    // build would not build, or where a weight is not finite (quantize_rtn's path then decides).
    static std::unique_ptr<Int4Decode> quantize(const std::vector<at::Tensor> &parts, int64_t group_size,
                                                bool int8_activations = false);

    // out[m, n] (fp32, row stride ldo) = x[m, :] W^T for every row of x, fp32 or bf16 [M, K]
    // rounded to bf16 as the WOQ bf16 kernels do (or, for int8 activations, quantized in
    // batches of more than kMaxRows rows).
    void run(const at::Tensor &x, float *out, int64_t ldo) const;

    // One decode step of several projections in one parallel region: job j computes
    // out_j[m_j, n_j] (row stride ldo_j) = x_j W_j^T for up to kMaxRows rows of x_j (fp32 or
    // bf16 [m_j, K_j]) as run() does. The jobs' tiles are split over the threads together, so
    // a token's many small projections (the experts it chose) cost one fork and join, not one
    // each; jobs on the same x tensor (and grouping) prepare it once.
    struct Job {
        const Int4Decode *w;
        at::Tensor x;
        float *out;
        int64_t ldo;
    };
    static void decode_jobs(const std::vector<Job> &jobs);

    int64_t in_features() const { return k_; }
    int64_t out_features() const { return n_; }
    // Bytes of this layout.
    uint64_t bytes() const { return data_bytes_ + (scales_.size() + zeros_.size()) * sizeof(uint16_t); }

private:
    // Whether this CPU and a layer of k input channels in groups of group_size take the layout.
    static bool takes(int64_t k, int64_t group_size, bool int8_activations);
    // The layout's fields for n x k weights in groups of group_size: scales and zero points
    // zeroed, the codes of rows past n zeroed and the others left for the builder to write
    // (its threads then touch the pages first, each its share, instead of one thread zeroing all).
    static std::unique_ptr<Int4Decode> allocate(int64_t n, int64_t k, int64_t group_size, bool int8_activations,
                                                bool integer_zeros);
    // Rows of x up to kMaxRows through the decode kernel.
    void decode(const at::Tensor &x, float *out, int64_t ldo) const;
    // x as the decode kernel reads it: bf16 rows xb [m, k] and their group sums xsum [m, groups].
    void prepare(const at::Tensor &x, std::vector<uint16_t> &xb, std::vector<float> &xsum) const;
    kernels::Int4DecodeArgs args(const uint16_t *xb, const float *xsum, int64_t m, float *out, int64_t ldo) const;
    woq::kernels::TiledInt4View view() const;
    int64_t n_ = 0, k_ = 0, group_size_ = 0, groups_ = 0, tiles_ = 0;
    bool int8_ = false, integer_zeros_ = false;
    std::unique_ptr<uint8_t[]> data_;  // [tile][unit][row of tile][64 bytes]
    size_t data_bytes_ = 0;
    std::vector<uint16_t> scales_;    // fp16 [tile][group][row of tile]
    std::vector<uint16_t> zeros_;     // fp16, same layout
};

namespace kernels {
// The AVX512-BF16 kernel (int4_decode_avx512.cpp): tiles [t0, t1) of the layout above for
// m rows of bf16 x [m, k] with their per-group sums xsum [m, groups].
struct Int4DecodeArgs {
    const uint8_t *data;
    const uint16_t *scales, *zeros;  // fp16
    int64_t k, groups;
    int64_t group_size;  // 32, 64 or a multiple of kUnit
    const uint16_t *x;
    const float *xsum;
    int64_t m;
    float *out;
    int64_t ldo, n;
    float *scratch;  // 2 * groups * kTileRows floats, 32-byte aligned, per concurrent call
};
void int4_decode_avx512(const Int4DecodeArgs &a, int64_t t0, int64_t t1);
// Round-to-nearest int4 of one row of k weights (fp32, fp16 or bf16 bits) in groups of
// group_size (a multiple of 16) as woq::quantize_rtn computes it: the row's scales and zero
// points [k / group_size] as fp16 (group g's at scales[g * meta_stride], rounded to nearest
// even), its codes (scratch of k bytes) packed as Int4Decode lays a tile row out (unit u's 64
// bytes at out + u * unit_stride). False (outputs unfinished) where a value is not finite or a
// scale lies outside fp16's normal range.
enum class QuantizeSource { f32, f16, bf16 };
// One row of lib/woq's packed int4 (woq_layout.h; k a multiple of kUnit, no padding) laid out
// as a tile row: unit u's 64 bytes at out + u * unit_stride.
void int4_tile_row_from_packed_avx512(const uint8_t *packed, int64_t k, uint8_t *out, int64_t unit_stride);
bool int4_quantize_row_avx512(const void *row, QuantizeSource type, int64_t k, int64_t group_size, uint8_t *codes,
                              uint8_t *out, int64_t unit_stride, uint16_t *scales, uint16_t *zeros,
                              int64_t meta_stride);
}  // namespace kernels

}  // namespace ipex::llm
