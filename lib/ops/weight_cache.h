// Prepacked copies of one weight tensor, one per oneDNN weight layout asked for (at most
// kMaxLayouts). Contexts that differ only in post-ops share one cache. A primitive for a new
// shape is steered to the layout already packed (prefer_packed), so the copies do not grow
// with the shapes a model is fed. Thread safe.
#pragma once

#include <ATen/ATen.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
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
    // A plain weight made on first use only (by get() or plain()): a context whose usual path
    // reads another copy of the weight holds none in oneDNN's dims until a primitive needs one.
    // `sizes`: the dims `make_plain` will return.
    WeightCache(std::vector<int64_t> sizes, std::function<at::Tensor()> make_plain)
        : sizes_(std::move(sizes)), make_plain_(std::move(make_plain)) {}

    struct Packed {
        at::Tensor buffer;    // owns the bytes
        dnnl::memory memory;  // describes them
    };

    // The weight reordered into `desc` (done once per distinct desc); the plain tensor itself,
    // no copy, when `desc` is its own layout and it was adopted (adopt_plain).
    Packed get(const dnnl::memory::desc &desc);
    // Makes the plain tensor's own layout the first "packed" one: primitives that take it
    // (prefer_packed) read the weight in place, so one copy serves every shape. Call before
    // the first get().
    void adopt_plain();

    size_t layouts() const;
    // Bytes of the copies made (an adopted plain weight counts nothing).
    int64_t packed_bytes() const;
    // Whether a copy in `desc` is held.
    bool holds(const dnnl::memory::desc &desc) const;
    // The plain weight (made now if it was deferred).
    at::Tensor plain() const;
    // Its dims, without making it.
    std::vector<int64_t> sizes() const;
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
            const std::string impl = packed.impl_info_str();
            // An adopted plain weight is read in place by any implementation but the reference one.
            if (impl == chosen.impl_info_str() || (adopted_ && impl.rfind("ref", 0) != 0)) return packed;
        } catch (const dnnl::error &) {
            // no implementation takes that layout for this shape: a second copy it is
        }
        return chosen;
    }

private:
    // plain_, made first if it was deferred; call with mutex_ held.
    const at::Tensor &plain_locked() const;

    mutable at::Tensor plain_;
    std::vector<int64_t> sizes_;                 // a deferred plain weight's dims
    mutable std::function<at::Tensor()> make_plain_;  // empty once plain_ is made
    dnnl::memory::desc plain_desc_;  // zero: the strides of plain_
    bool adopted_ = false;
    mutable std::mutex mutex_;
    std::vector<std::pair<dnnl::memory::desc, Packed>> packed_;
};

}  // namespace ipex::ops
