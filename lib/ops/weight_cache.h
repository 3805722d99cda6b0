// Prepacked copies of one weight tensor, one per oneDNN weight layout asked for (at most
// kMaxLayouts). Contexts that differ only in post-ops share one cache. A primitive for a new
// shape is steered to the layout already packed (prefer_packed), so the copies do not grow
// with the shapes a model is fed. Thread safe.
#pragma once

#include <ATen/ATen.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace ipex::ops {

class WeightCache {
public:
    static constexpr size_t kMaxLayouts = 8;

    // `plain` is the weight in oneDNN's logical dims ([G,] O, I, spatial...), contiguous.
    explicit WeightCache(at::Tensor plain) : plain_(std::move(plain)) {}
    // The same with the plain layout given (int8 weights, whose tensor dims differ from oneDNN's).
    WeightCache(at::Tensor plain, dnnl::memory::desc plain_desc)
        : plain_(std::move(plain)), plain_desc_(std::move(plain_desc)) {}

    struct Packed {
        at::Tensor buffer;    // owns the bytes
        dnnl::memory memory;  // describes them
    };

    // The weight reordered into `desc` (done once per distinct desc).
    Packed get(const dnnl::memory::desc &desc);

    size_t layouts() const;
    // Whether a copy in `desc` is held.
    bool holds(const dnnl::memory::desc &desc) const;
    const at::Tensor &plain() const { return plain_; }
    // The layout of the first packed copy (a zero desc before any).
    dnnl::memory::desc first_layout() const;

    // The primitive descriptor `make(weights_md)` returns for `any` (oneDNN's choice for this
    // shape), or the one for the layout already packed when oneDNN builds it with the same
    // implementation: the shape then reuses the packed copy instead of adding one.
    template <class Make>
    auto prefer_packed(const dnnl::memory::desc &any, Make make) const -> decltype(make(any)) {
        auto chosen = make(any);
        const dnnl::memory::desc first = first_layout();
        if (first == dnnl::memory::desc() || chosen.weights_desc() == first) return chosen;
        try {
            auto packed = make(first);
            if (std::string(packed.impl_info_str()) == chosen.impl_info_str()) return packed;
        } catch (const dnnl::error &) {
            // no implementation takes that layout for this shape: a second copy it is
        }
        return chosen;
    }

private:
    at::Tensor plain_;
    dnnl::memory::desc plain_desc_;  // zero: the strides of plain_
    mutable std::mutex mutex_;
    std::vector<std::pair<dnnl::memory::desc, Packed>> packed_;
};

}  // namespace ipex::ops
