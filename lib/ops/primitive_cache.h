// A small least-recently-used map from an input signature to a ready oneDNN primitive (and
// what it needs). Bounded: a model fed many shapes keeps only the latest kMaxShapes (16 per op unless
// the cache is shared by many ops). The
// signature is a short list of integers (sizes, dtypes, kinds), compared on every call, so a
// lookup costs no formatting.
#pragma once

#include <algorithm>
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

    // Puts `entry` unless the key is there already; returns the entry the cache then holds
    // (so threads that raced to make one all use the first).
    std::shared_ptr<const Entry> put_if_absent(const CacheKey &key, std::shared_ptr<const Entry> entry) {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto &e : entries_)
            if (e.first == key) return e.second;
        entries_.emplace_front(key, std::move(entry));
        if (entries_.size() > kMaxShapes) entries_.pop_back();
        return entries_.front().second;
    }

    size_t size() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return entries_.size();
    }

private:
    mutable std::mutex mutex_;
    std::list<std::pair<CacheKey, std::shared_ptr<const Entry>>> entries_;
};

// The row count (product of an input's leading dims: batch x sequence for a linear) a
// primitive is built for. The first kExactRows distinct counts an op sees get primitives of
// their own, which covers models fed fixed shapes. A count seen after that runs on the
// primitive of its bucket, its input padded with zero rows: counts up to 16 are their own
// bucket, larger ones are rounded up to a multiple of 1/8 of their power of two (at most 12.5%
// more rows, 8 buckets per doubling). A model fed ever-new sequence lengths thus builds a
// bounded set of primitives, and its packed weights never depend on the length. Thread safe.
class RowBuckets {
public:
    static constexpr size_t kExactRows = 8;

    static int64_t bucket(int64_t rows) {
        if (rows <= 16) return rows;
        int64_t power = 1;
        while (power * 2 <= rows) power *= 2;
        const int64_t step = power / 8;
        return (rows + step - 1) / step * step;
    }

    // `rows` itself, or its bucket once kExactRows other counts have their own primitives.
    int64_t rows_to_build(int64_t rows) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (std::find(exact_.begin(), exact_.end(), rows) != exact_.end()) return rows;
        if (exact_.size() < kExactRows) {
            exact_.push_back(rows);
            return rows;
        }
        return bucket(rows);
    }

private:
    std::mutex mutex_;
    std::vector<int64_t> exact_;
};

}  // namespace ipex::ops
