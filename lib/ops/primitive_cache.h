// A small least-recently-used map from an input signature to a ready oneDNN primitive (and
// what it needs). Bounded: a model fed many shapes keeps only the latest kMaxShapes (16 per op unless
// the cache is shared by many ops). The
// signature is a short list of integers (sizes, dtypes, kinds), compared on every call, so a
// lookup costs no formatting.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace ipex::ops {

using CacheKey = std::vector<int64_t>;

template <class Entry, size_t Capacity = 16>
class PrimitiveCache {
public:
    static constexpr size_t kMaxShapes = Capacity;

    std::shared_ptr<const Entry> find(const CacheKey &key) {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto it = entries_.begin(); it != entries_.end(); ++it) {
            if (it->first != key) continue;
            entries_.splice(entries_.begin(), entries_, it);
            return entries_.front().second;
        }
        return nullptr;
    }

    void put(const CacheKey &key, std::shared_ptr<const Entry> entry) {
        std::lock_guard<std::mutex> lock(mutex_);
        entries_.emplace_front(key, std::move(entry));
        if (entries_.size() > kMaxShapes) entries_.pop_back();
    }

    size_t size() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return entries_.size();
    }

private:
    mutable std::mutex mutex_;
    std::list<std::pair<CacheKey, std::shared_ptr<const Entry>>> entries_;
};

}  // namespace ipex::ops
