// Prepacked copies of one weight tensor, one per oneDNN weight layout asked for. Contexts
// that differ only in post-ops share one cache. Thread safe.
#pragma once

#include <ATen/ATen.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <mutex>
#include <utility>
#include <vector>

namespace ipex::ops {

class WeightCache {
public:
    // `plain` is the weight in oneDNN's logical dims ([G,] O, I, spatial...), contiguous.
    explicit WeightCache(at::Tensor plain) : plain_(std::move(plain)) {}

    struct Packed {
        at::Tensor buffer;    // owns the bytes
        dnnl::memory memory;  // describes them
    };

    // The weight reordered into `desc` (done once per distinct desc).
    Packed get(const dnnl::memory::desc &desc);

    size_t layouts() const;
    const at::Tensor &plain() const { return plain_; }

private:
    static constexpr size_t kMaxLayouts = 8;
    at::Tensor plain_;
    mutable std::mutex mutex_;
    std::vector<std::pair<dnnl::memory::desc, Packed>> packed_;
};

}  // namespace ipex::ops
