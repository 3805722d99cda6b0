// The own AVX-512 kernels of the convolution and pooling ops (the depthwise and grouped ones also
// in an fp32 AVX2 + FMA build), for shapes oneDNN 2.6 runs far from this CPU's limits, all on
// channels-last data with products and sums in fp32 (bf16 inputs and weights widen exactly),
// post-ops in fp32 and one rounding to the output dtype:
// - run: depthwise 2-D convolution (one input and one output channel per group) with the
//   elementwise post-ops a folded activation leaves;
// - run_pointwise: 1x1 convolution (bf16 or fp32) with the same post-ops;
// - run_grouped: grouped convolution with 16, 32, ... output channels per group, the same post-ops;
// - run_post_ops: the trailing sigmoid / SiLU of other convolutions;
// - run_spatial_mean: the mean over the two spatial dims (the global average pool);
// - run_channel_scale: a per-(image, channel) bf16 factor (the squeeze-excitation gate);
// - run_scale_shift: an inference batch norm (and ReLU) over concatenated inputs.
// Used by prepacked convolutions (conv_context.h), ipex::spatial_mean (pool_op.h),
// ipex::norm_relu and ipex::scale_mul (norm_op.h) where they apply; the convolution kernels
// are timed against oneDNN per shape (prefer_own).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ipex::ops::own_kernels {

enum class Act { relu, leaky_relu, clip, silu, sigmoid, hardswish };

struct Eltwise {
    Act act = Act::relu;
    float alpha = 0.f, beta = 0.f;  // leaky_relu: slope; clip: bounds
};

struct Problem {
    bool bf16_in = false, bf16_out = false;
    const void *src = nullptr;  // n x ih x iw x c, dense
    void *dst = nullptr;        // n x oh x ow x c, dense
    // kh x kw x c, fp32, then kWeightPadding zeros: read by the AVX-512 build (the AVX2 build
    // reads weight_blocks alone, and a plan for it keeps only those).
    const float *weight = nullptr;
    static constexpr int64_t kWeightPadding = 64;
    const float *bias = nullptr;    // c, or nullptr
    // bf16 input, optional: the weight again as bf16 pairs of kernel rows for the interior
    // columns of the kernels weight_pairs_used() names, made by pack_weight_pairs.
    const uint16_t *weight_pairs = nullptr;
    int64_t weight_pairs_blocks = 0;  // its 32-channel blocks per tap: weight_pairs_blocks(c)
    // fp32 on the AVX2 build, required there: the weight as [c / 16][kh][kw][16] blocks
    // (zeros past c), made by pack_weight_blocks.
    const float *weight_blocks = nullptr;
    int64_t n = 0, c = 0, ih = 0, iw = 0, oh = 0, ow = 0, kh = 0, kw = 0;
    int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
    static constexpr int kMaxPostOps = 4;
    Eltwise post_ops[kMaxPostOps];  // the first num_post_ops, in order
    int num_post_ops = 0;
};

// Problem::weight_pairs from the kh x kw x c weight (bf16 values): 2 x kh x kw x
// weight_pairs_blocks(c) blocks of 64 bf16 (an even count per tap, so a kernel taking 64
// channels at a time never reads past a tap's blocks). Block [s][h][w][b] holds channels 32b .. 32b + 31 of taps (h, w) and
// (h + 1, w) (s = 0), or of (h, w) and zero (s = 1; also s = 0 for the last row): first 16
// pairs for channels 8 (j / 4) + j % 4, then 16 for 8 (j / 4) + 4 + j % 4 (j = 0..15 within
// each 32), the order VPUNPCKLWD / VPUNPCKHWD interleave two rows of 32 channels in; each
// pair is the row-h value then the row-(h + 1) one; zeros past c. `out` holds
// weight_pairs_size(kh, kw, c) values. Portable code.
constexpr int64_t weight_pairs_blocks(int64_t c) { return 2 * ((c + 63) / 64); }
// The channel (within its block of 32) that pair j (0..15) of half 0 or 1 holds.
constexpr int pair_lane_channel(int half, int j) { return 8 * (j / 4) + 4 * half + j % 4; }
// Whether run() takes the paired weight: bf16 input, stride 1 and dilation 1 along the width,
// a 3- or 5-wide kernel (other depthwise convolutions do not need it packed).
constexpr bool weight_pairs_used(int64_t kw, int64_t stride_w, int64_t dilation_w) {
    return stride_w == 1 && dilation_w == 1 && (kw == 3 || kw == 5);
}
int64_t weight_pairs_size(int64_t kh, int64_t kw, int64_t c);
void pack_weight_pairs(const float *weight, int64_t kh, int64_t kw, int64_t c, uint16_t *out);
// Problem::weight_blocks from the kh x kw x c weight: weight_blocks_size(kh, kw, c) values.
// Portable code.
int64_t weight_blocks_size(int64_t kh, int64_t kw, int64_t c);
void pack_weight_blocks(const float *weight, int64_t kh, int64_t kw, int64_t c, float *out);

// The eltwise post-op kind named as in post_ops.h, if the kernel computes it.
bool to_act(const std::string &kind, Act *act);

// Whether this CPU runs the kernel (AVX-512; AVX512-BF16 when bf16 is involved).
bool available(bool bf16);
// Whether this CPU runs the depthwise kernel (run): available(bf16), or for fp32 AVX2 + FMA.
bool depthwise_available(bool bf16);

// Runs the depthwise problem parallel over output rows. Call only when depthwise_available().
void run(const Problem &p);
// Its builds, which run chooses between: AVX-512 (both dtypes), AVX2 + FMA (fp32; takes
// weight_blocks, not weight_pairs).
void run_depthwise_avx512(const Problem &p);
void run_depthwise_avx2(const Problem &p);

// A 1x1 convolution, stride 1, no padding, one group, on channels-last data: the product of
// the m x k pixels by the k x n weight, sums in fp32 (bf16: VDPBF16PS, bf16 products), then
// the bias and the post-ops in registers and one rounding to the output dtype. Each output
// value is written once, with its activation: where oneDNN 2.6 runs few input channels far
// from the peak, and its fused SiLU costs more than the products.
struct Pointwise {
    bool bf16 = true;             // bf16 data and weight, else fp32
    const void *src = nullptr;    // m x k, dense
    void *dst = nullptr;          // m x n, dense
    const void *weight = nullptr;  // packed as below
    const float *bias = nullptr;  // n rounded up to 16 (zeros after n), or nullptr
    int64_t m = 0, k = 0, n = 0;
    Problem activation;  // its post_ops / num_post_ops only
    // A residual sum before the post-ops: dst holds the summand on entry (in the output's
    // dtype), and each output is activation(conv + sum_scale * summand).
    bool sum = false;
    float sum_scale = 1.f;
};
// The packed weight, zeros where o >= n (and i >= k): bf16, w[o][i] at [i / 2][o / 16][o % 16]
// [i % 2] of (k + 1) / 2 x ceil(n / 16) x 16 x 2; fp32, at [i][o] of k x (16 ceil(n / 16)).
void run_pointwise(const Pointwise &p);  // call only when available(p.bf16)

// A grouped 2-D convolution whose groups have a multiple of 16 output channels each (RegNet's
// and ResNeXt's 3x3 convolutions), on channels-last data: 12 output pixels at a time (6 in the
// AVX2 build; consecutive in the output, across rows and images), for each 16-output tile of each group a sum per pixel
// in a register, each weight vector (bf16: 16 outputs x a pair of inputs, VDPBF16PS; fp32: 16
// outputs x 1, FMA) multiplied by every pixel's broadcast input, then the bias and post-ops and
// one rounding. The block's input comes from memory once for all groups; a stride changes only
// the addresses. Where oneDNN 2.6's channels-last grouped kernel runs stride-2 layers far from
// the peak (AVX-512), or every grouped layer (AVX2: 57 GFLOP/s of 186 inside RegNet).
constexpr int64_t kGroupedMaxTaps = 49;  // kh * kw at most
struct Grouped {
    bool bf16 = true;             // bf16 data and weight, else fp32
    const void *src = nullptr;    // n x ih x iw x (groups * in_per_group), dense
    void *dst = nullptr;          // n x oh x ow x (groups * out_per_group), dense
    const void *weight = nullptr;  // packed as below
    const float *bias = nullptr;  // groups * out_per_group, or nullptr
    int64_t groups = 0, in_per_group = 0, out_per_group = 0;
    int64_t n = 0, ih = 0, iw = 0, oh = 0, ow = 0, kh = 0, kw = 0;
    int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
    Problem activation;  // its post_ops / num_post_ops only
    // A residual sum before the post-ops: dst holds the summand on entry (in the output's
    // dtype), and each output is activation(conv + sum_scale * summand).
    bool sum = false;
    float sum_scale = 1.f;
};
// The packed weight: for group g, output tile t (outputs 16 t .. 16 t + 15 of the group), tap
// (h, w): bf16, w[o][i] at [g][t][h][w][i / 2][o % 16][i % 2]; fp32, at [g][t][h][w][i][o % 16].

// Whether the kernel computes a grouped convolution of these channels per group and taps.
constexpr bool grouped_fits(bool bf16, int64_t in_per_group, int64_t out_per_group, int64_t taps) {
    return out_per_group % 16 == 0 && out_per_group > 0 && in_per_group > 0 && (!bf16 || in_per_group % 2 == 0) &&
           taps <= kGroupedMaxTaps;
}
// Whether this CPU runs run_grouped: AVX-512 (AVX512-BF16 for bf16), or for fp32 AVX2 + FMA.
bool grouped_available(bool bf16);
void run_grouped(const Grouped &p);  // call only when grouped_available(p.bf16) and grouped_fits
// Whether the AVX2 build walks p tile by tile (each tile over every block of pixels, parallel
// over tiles) instead of block by block (each block through every tile, parallel over blocks).
// The block walk reads every weight once per block, which costs little while the weights stay
// in L2 and a lot when they do not and the blocks are few (ResNet-50's 512-channel 3x3 layers at
// batch 1: 9.4 MB from L3 or memory for each of 9 blocks of 6 pixels). So: when the weights do
// not fit one core's L2, the input the blocks read is at most kTileWalkInputL2s times its size
// (each tile's pass reads it again, mostly from L2: one L2 measured 1.04-1.4x on 512-channel
// layers, four 1.35-1.45x on ResNet-18's at batch 8, 800 KB; 3.2 MB of input was 0.9x), there
// are at least two tiles per thread and at most kMaxTileWalkPixels output pixels.
constexpr int64_t kMaxTileWalkPixels = 3072;
constexpr int64_t kTileWalkInputL2s = 4;
bool grouped_walks_tiles(const Grouped &p);
// Its builds, which run_grouped chooses between: AVX-512 (both dtypes), AVX2 + FMA (fp32).
void run_grouped_avx512(const Grouped &p);
void run_grouped_avx2(const Grouped &p);

// The mean over the pixels of each image, per channel, on channels-last data: sums in fp32
// (in chunks of pixels, then across chunks), one rounding to the output dtype. The global
// average pool of CNN heads and squeeze-excitation blocks, where libtorch 1.13 reduces
// channels-last bf16 at a third of the memory bandwidth.
struct SpatialMean {
    bool bf16 = true;           // bf16 input and output, else fp32
    const void *src = nullptr;  // n x hw x c, dense
    void *dst = nullptr;        // n x c, dense
    int64_t n = 0, hw = 0, c = 0;
};
// Pixels per chunk, in both builds: the split depends on the shape alone, so the result does not
// depend on the thread count, and fp32 rounding grows with the chunk, not the image.
constexpr int64_t kSpatialMeanChunk = 256;
void run_spatial_mean(const SpatialMean &p);  // call only when available(p.bf16)
// The same on any CPU (portable code; AVX2 where the CPU has it): the same split into chunks of
// pixels, sums in fp32, one rounding; within a chunk the order of the adds may differ.
void run_spatial_mean_portable(const SpatialMean &p);

// Each channel of each image times its own factor, on bf16 channels-last data: dst[i][q][c] =
// src[i][q][c] * scale[i * scale_image_stride + c] in fp32, one rounding (the gate of a
// squeeze-excitation block, x * s with s of n x c x 1 x 1; aten's numbers at twice the speed
// of its bf16 multiply; its fp32 one needs no help). dst may be src.
struct ChannelScale {
    const uint16_t *src = nullptr;    // n x hw x c, dense
    uint16_t *dst = nullptr;          // n x hw x c, dense; src itself or apart from it
    const uint16_t *scale = nullptr;  // c values per image
    int64_t scale_image_stride = 0;   // c, or 0: one row for every image
    int64_t n = 0, hw = 0, c = 0;
};
void run_channel_scale(const ChannelScale &p);  // call only when available(true)

// The inference batch norm as a per-channel scale and shift, optionally then a ReLU, over
// the concatenation along channels of channels-last inputs, written to one channels-last
// output: out[q][off_i + c] = max(0, in_i[q][c] * scale[off_i + c] + shift[off_i + c]) in
// fp32, one rounding to the output dtype (DenseNet's cat -> batch_norm -> relu, one read and
// one write instead of three of each).
struct ScaleShift {
    bool bf16 = true;                   // bf16 inputs and output, else fp32
    bool relu = true;                   // ReLU after the shift (NaN stays NaN)
    int64_t inputs = 0;                 // how many
    const void *const *src = nullptr;   // inputs[i]: pixels x channels[i], dense
    const int64_t *channels = nullptr;  // channels of each input, > 0
    void *dst = nullptr;                // pixels x (sum of channels), dense
    const float *scale = nullptr, *shift = nullptr;  // sum of channels each
    int64_t pixels = 0;                 // n * h * w
};
void run_scale_shift(const ScaleShift &p);  // call only when available(p.bf16)
// The same on any CPU (portable code; AVX2 + FMA where the CPU has them), the same numbers:
// one fused multiply-add per value.
void run_scale_shift_portable(const ScaleShift &p);

// The 2-D max pooling of a channels-last input, on any CPU (portable code; AVX2 where the CPU
// has it), with aten's numbers: each window clipped to the image (the padding never wins), its
// maximum the largest value (the first of equal ones), or NaN where the window holds a NaN (a
// max is exact: aten's values; a NaN keeps its input bits). Parallel over output rows; each output pixel's channels are one vector loop per
// window pixel, read from memory once per window that holds them.
struct MaxPool {
    bool bf16 = false;          // bf16 input and output, else fp32
    const void *src = nullptr;  // n x ih x iw x c, dense
    void *dst = nullptr;        // n x oh x ow x c, dense
    int64_t n = 0, c = 0, ih = 0, iw = 0, oh = 0, ow = 0, kh = 0, kw = 0;
    int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
};
void run_max_pool_portable(const MaxPool &p);

// Two channel groups interleaved, channels-last: out[q][2 j] = a[q][j], out[q][2 j + 1] =
// b[q][j] for j < cpg, bit copies (ipex::channel_shuffle with two groups).
struct Interleave {
    bool bf16 = true;                          // 2-byte values, else 4-byte
    const void *a = nullptr, *b = nullptr;     // pixel q's group at a + q * a_stride values
    int64_t a_stride = 0, b_stride = 0;
    void *dst = nullptr;                       // pixels x 2 cpg, dense
    int64_t cpg = 0, pixels = 0;
};
bool interleave_available();  // AVX-512 or AVX2
void run_interleave(const Interleave &p);  // call only when interleave_available()
void run_interleave_avx512(const Interleave &p);
void run_interleave_avx2(const Interleave &p);

// A dense NCHW fp32 tensor of three channels (a stem convolution's image batch) written
// channels-last, as fp32 or as bf16 (nearest even, as aten's cast): 16 pixels of the three
// planes per step, interleaved in registers. Parallel over blocks of pixels. Call only when
// available(bf16).
struct ThreePlanes {
    const float *src = nullptr;  // n x 3 x pixels
    void *dst = nullptr;         // n x pixels x 3, fp32 or bf16
    bool bf16 = false;
    int64_t n = 0, pixels = 0;
};
void run_three_planes_to_pixels(const ThreePlanes &p);

// p's post-ops on n dense values at `data` (bf16 when p.bf16_out, else fp32), in place,
// parallel: the activation a convolution left out of its oneDNN primitive. Call only when
// available().
void run_post_ops(const Problem &p, void *data, int64_t n);

// Which code runs a depthwise convolution, and a convolution's trailing sigmoid / SiLU
// (IPEX_CONV_KERNELS: 0 = oneDNN, its post-ops fused; 1 = this kernel; unset or "auto" = the
// faster of both, timed on the first call per input shape).
constexpr const char *kChoiceVariable = "IPEX_CONV_KERNELS";
enum class Choice { onednn, own, timed };
Choice choice_from_env(const char *value);  // throws (TORCH_CHECK) on another value

// The timed choice: this kernel when its best time beats oneDNN's best; oneDNN on a tie.
bool prefer_own(const double *own_seconds, const double *onednn_seconds, int runs);

// Times `own` and `onednn` (one warm-up call each, then `runs` alternating): whether the own
// code was faster (prefer_own) and the best time of each. `before`, when given, is called
// before every timed call and not timed (a CacheEvictor: a call whose input comes from memory).
struct Timed {
    bool own;
    double own_seconds, onednn_seconds;
};
Timed time_both(const std::function<void()> &own, const std::function<void()> &onednn, int runs,
                const std::function<void()> &before = {});

// Each call writes over a buffer twice the last-level cache (made on the first call, freed with
// the object): what the caches held before is gone, as a network's input is when its first
// convolution reads it. A timed choice's `before` (time_both).
class CacheEvictor {
public:
    void operator()();

private:
    std::vector<uint8_t> buffer_;
};

}  // namespace ipex::ops::own_kernels
