#include "ops/weight_cache.h"

#include "ops/onednn_utils.h"

namespace ipex::ops {

const at::Tensor &WeightCache::plain_locked() const {
    if (make_plain_) {
        plain_ = make_plain_();
        make_plain_ = nullptr;
    }
    return plain_;
}

at::Tensor WeightCache::plain() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return plain_locked();
}

std::vector<int64_t> WeightCache::sizes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return make_plain_ ? sizes_ : plain_.sizes().vec();
}

WeightCache::Packed WeightCache::get(const dnnl::memory::desc &desc) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto &entry : packed_)
        if (entry.first == desc) return entry.second;
    at::Tensor buffer = at::empty({static_cast<int64_t>(desc.get_size())}, at::kByte);
    dnnl::memory packed(desc, cpu_engine(), buffer.data_ptr());
    const at::Tensor &plain = plain_locked();
    const dnnl::memory src = wrap(plain, plain_desc_ == dnnl::memory::desc() ? strided_desc(plain) : plain_desc_);
    auto &stream = thread_stream();
    dnnl::reorder(src, packed).execute(stream, const_cast<dnnl::memory &>(src), packed);
    stream.wait();
    // The first layout stays: new shapes are steered to it (prefer_packed). Primitives still
    // holding an evicted copy keep its buffer alive until they are dropped themselves.
    if (packed_.size() >= kMaxLayouts) packed_.erase(packed_.begin() + 1);
    packed_.push_back({desc, {buffer, packed}});
    return packed_.back().second;
}

void WeightCache::adopt_plain() {
    std::lock_guard<std::mutex> lock(mutex_);
    TORCH_CHECK(packed_.empty(), "WeightCache::adopt_plain: the weight is already packed");
    const at::Tensor &plain = plain_locked();
    const dnnl::memory::desc desc = plain_desc_ == dnnl::memory::desc() ? strided_desc(plain) : plain_desc_;
    packed_.push_back({desc, {plain, wrap(plain, desc)}});
    adopted_ = true;
}

dnnl::memory::desc WeightCache::first_layout() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return packed_.empty() ? dnnl::memory::desc() : packed_.front().first;
}

bool WeightCache::holds(const dnnl::memory::desc &desc) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto &entry : packed_)
        if (entry.first == desc) return true;
    return false;
}

int64_t WeightCache::packed_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t bytes = 0;
    for (const auto &entry : packed_)
        if (!entry.second.buffer.is_same(plain_)) bytes += entry.second.buffer.nbytes();
    return bytes;
}

size_t WeightCache::layouts() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return packed_.size();
}

}  // namespace ipex::ops
