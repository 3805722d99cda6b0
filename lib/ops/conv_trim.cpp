// ConvolutionContext::trimmed_for and the live-tap geometry (conv_context.h): a tap whose input
// position falls in the padding for every output position adds exact zeros, so a convolution
// whose outer taps all do (dilated 3x3 convolutions on maps smaller than their dilation, as in
// DeepLab's ASPP on small inputs: only the center tap ever reads the image) runs as the same
// convolution with those taps cut off and the padding reduced to match.
#include <ATen/ATen.h>

#include <mutex>
#include <utility>
#include <vector>

#include "ops/conv_context.h"

namespace ipex::ops {

struct ConvolutionContext::TrimCache {
    std::mutex mutex;
    // input spatial sizes -> the trimmed context, or null where no tap is cut
    std::vector<std::pair<std::vector<int64_t>, c10::intrusive_ptr<ConvolutionContext>>> entries;
};

LiveTaps live_taps(const ConvParams &p, at::IntArrayRef weight_sizes, at::IntArrayRef input) {
    LiveTaps live;
    const size_t spatial = weight_sizes.size() - 2;
    if (p.transposed || input.size() != weight_sizes.size()) return live;
    for (size_t d = 0; d < spatial; ++d) {
        const int64_t k = weight_sizes[d + 2], in = input[d + 2];
        const int64_t s = p.stride[d], dil = p.dilation[d], pad = p.padding[d];
        const int64_t span = in + 2 * pad - dil * (k - 1) - 1;  // below 0: no output
        if (in < 1 || span < 0) return LiveTaps{};
        const int64_t out = span / s + 1;
        // Tap t reads in position o * s - pad + t * dil for o in [0, out): live when one is inside.
        const auto reads_image = [&](int64_t t) {
            const int64_t offset = t * dil - pad;  // the position output 0 reads
            const int64_t first = offset >= 0 ? 0 : (-offset + s - 1) / s;  // first o reading >= 0
            return first < out && first * s + offset < in;
        };
        int64_t lo = 0, hi = k;
        while (lo < k && !reads_image(lo)) ++lo;
        while (hi > lo && !reads_image(hi - 1)) --hi;
        live.lo.push_back(lo);
        live.hi.push_back(hi);
    }
    return live;
}

bool LiveTaps::cuts(at::IntArrayRef weight_sizes, const ConvParams &p) const {
    if (lo.empty()) return false;
    bool cut = false;
    for (size_t d = 0; d < lo.size(); ++d) {
        const int64_t k = weight_sizes[d + 2];
        if (lo[d] == 0 && hi[d] == k) continue;
        // Cut symmetrically (one padding per dim), at least one tap left, padding still >= 0.
        if (hi[d] <= lo[d] || lo[d] != k - hi[d] || p.padding[d] < lo[d] * p.dilation[d]) return false;
        cut = true;
    }
    return cut;
}

c10::intrusive_ptr<ConvolutionContext> ConvolutionContext::trimmed_for(at::IntArrayRef batched_input) const {
    if (!trims_) return {};  // no input size can cut a tap (new_trim_cache)
    const std::vector<int64_t> key(batched_input.begin() + 2, batched_input.end());
    std::lock_guard<std::mutex> lock(trims_->mutex);
    for (const auto &[sizes, ctx] : trims_->entries)
        if (sizes == key) return ctx;
    c10::intrusive_ptr<ConvolutionContext> trimmed;
    const LiveTaps live = live_taps(params_, weight_.sizes(), batched_input);
    if (live.cuts(weight_.sizes(), params_)) {
        at::Tensor w = weight_;
        ConvParams p = params_;
        for (size_t d = 0; d < live.lo.size(); ++d) {
            w = w.narrow(static_cast<int64_t>(d) + 2, live.lo[d], live.hi[d] - live.lo[d]);
            p.padding[d] -= live.lo[d] * p.dilation[d];
            if (live.hi[d] - live.lo[d] == 1) p.dilation[d] = 1;  // one tap: no spacing to keep
        }
        std::vector<int64_t> hint(batched_input.begin(), batched_input.end());
        hint[0] = 1;
        const c10::optional<at::Tensor> bias = bias_.defined() ? c10::optional<at::Tensor>(bias_) : c10::nullopt;
        trimmed = c10::make_intrusive<ConvolutionContext>(w.contiguous(), bias, p, dtype_, post_ops_, sum_in_place_,
                                                          std::move(hint));
    }
    // The oldest size goes first (a caller still running its context holds a reference).
    if (trims_->entries.size() >= kMaxTrimSizes) trims_->entries.erase(trims_->entries.begin());
    trims_->entries.emplace_back(key, trimmed);
    return trimmed;
}

size_t ConvolutionContext::trim_sizes() const {
    if (!trims_) return 0;
    std::lock_guard<std::mutex> lock(trims_->mutex);
    return trims_->entries.size();
}

int64_t ConvolutionContext::flops(at::IntArrayRef input) const {
    const int64_t rank = spatial_dims() + 2;
    const auto in = static_cast<int64_t>(input.size());
    if (in != rank && in != rank - 1) return 0;
    std::vector<int64_t> batched = input.vec();
    if (in == rank - 1) batched.insert(batched.begin(), 1);
    const std::vector<int64_t> out = output_sizes(batched);
    // Each output position meets I/G x taps weights per output channel; a transposed
    // convolution's input position meets O/G x taps per input channel.
    const std::vector<int64_t> &positions = params_.transposed ? batched : out;
    int64_t total = 2 * batched[0] * weight_.numel();
    // Taps that only ever read padding, cut by trimmed_for, are not computed (none can be
    // without a trim cache).
    const LiveTaps live = trims_ ? live_taps(params_, weight_.sizes(), batched) : LiveTaps{};
    if (live.cuts(weight_.sizes(), params_))
        for (size_t d = 0; d < live.lo.size(); ++d) total = total / weight_.size(d + 2) * (live.hi[d] - live.lo[d]);
    for (int64_t d = 2; d < rank; ++d) {
        if (out[d] < 1) return 0;
        total *= positions[d];
    }
    return total;
}

std::shared_ptr<ConvolutionContext::TrimCache> ConvolutionContext::new_trim_cache(const ConvParams &p,
                                                                                  at::IntArrayRef weight_sizes) {
    // A cut tap t of a dim leaves padding - t x dilation >= 0, so a dim can lose taps only where
    // the kernel has more than one and the padding reaches a dilation; else no input size cuts.
    if (p.transposed) return nullptr;
    for (size_t d = 0; d + 2 < weight_sizes.size(); ++d)
        if (weight_sizes[d + 2] > 1 && p.padding[d] >= p.dilation[d]) return std::make_shared<TrimCache>();
    return nullptr;
}

}  // namespace ipex::ops
