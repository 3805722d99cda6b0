#include "ops/cpu_allocator.h"

#include <c10/core/CPUAllocator.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <new>
#include <string>

namespace ipex::ops {

// At the block's start, kAlignment bytes before the data (which keeps the alignment libtorch
// expects); found again from the data pointer when the block is released.
struct CachingCpuAllocator::Header {
    CachingCpuAllocator *owner;  // null: not cached, free on release
    size_t size;                 // bytes after the header
};
static_assert(sizeof(void *) * 2 <= CachingCpuAllocator::kAlignment);

namespace {

constexpr size_t kPage = 4096;
size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

void *data_of(void *base) { return static_cast<char *>(base) + CachingCpuAllocator::kAlignment; }

// Blocks this large ask the kernel for transparent huge pages before their first touch (where
// THP is "madvise", the default of Debian's kernels, nothing else gets them): an embedding table
// of GBs read at random rows on 4 KiB pages misses the TLB on every row, and the page-table
// walk misses the caches too. The 2 MiB-aligned interior only; a failure changes nothing.
constexpr size_t kHugePageBytes = size_t{2} << 20;
constexpr size_t kHugePageMin = size_t{32} << 20;

void advise_huge_pages(void *base, size_t size) {
    if (size < kHugePageMin) return;
    const auto begin = round_up(reinterpret_cast<uintptr_t>(base), kHugePageBytes);
    const auto end = (reinterpret_cast<uintptr_t>(base) + size) / kHugePageBytes * kHugePageBytes;
    if (end > begin) ::madvise(reinterpret_cast<void *>(begin), end - begin, MADV_HUGEPAGE);
}

}  // namespace

CachingCpuAllocator::CachingCpuAllocator(size_t limit_bytes, size_t min_bytes)
    : limit_(limit_bytes), min_(std::max<size_t>(min_bytes, 1)) {}

CachingCpuAllocator::~CachingCpuAllocator() { release_cached(); }

c10::DataPtr CachingCpuAllocator::allocate(size_t nbytes) const {
    const bool cacheable = nbytes >= min_ && limit_ > 0;
    const size_t size = cacheable ? round_up(nbytes, kPage) : std::max<size_t>(nbytes, 1);
    void *base = nullptr;
    if (cacheable) {
        std::lock_guard<std::mutex> lock(mu_);
        // The smallest cached block that fits, if it is at most a quarter larger.
        auto it = by_size_.lower_bound(size);
        if (it != by_size_.end() && it->first <= size + size / 4) {
            base = it->second->base;
            stats_.cached_bytes -= it->first;
            lru_.erase(it->second);
            by_size_.erase(it);
            ++stats_.hits;
        } else {
            ++stats_.misses;
        }
    }
    if (!base) {
        if (posix_memalign(&base, kAlignment, size + kAlignment) != 0) throw std::bad_alloc();
        advise_huge_pages(base, size + kAlignment);
        auto *h = static_cast<Header *>(base);
        h->owner = cacheable ? const_cast<CachingCpuAllocator *>(this) : nullptr;
        h->size = size;
    }
    // The context is the data pointer itself, as libtorch's raw_allocate requires.
    void *data = data_of(base);
    return {data, data, &CachingCpuAllocator::release, c10::Device(c10::DeviceType::CPU)};
}

void CachingCpuAllocator::release(void *data) {
    if (!data) return;
    auto *h = reinterpret_cast<Header *>(static_cast<char *>(data) - kAlignment);
    if (h->owner) h->owner->give_back(h);
    else std::free(h);
}

void CachingCpuAllocator::give_back(Header *h) {
    std::lock_guard<std::mutex> lock(mu_);
    if (h->size > limit_) {
        std::free(h);
        return;
    }
    // Room for it: the least recently freed blocks go first.
    while (stats_.cached_bytes + h->size > limit_ && !lru_.empty()) {
        const Block oldest = lru_.front();
        auto range = by_size_.equal_range(oldest.size);
        for (auto it = range.first; it != range.second; ++it) {
            if (it->second == lru_.begin()) {
                by_size_.erase(it);
                break;
            }
        }
        lru_.pop_front();
        stats_.cached_bytes -= oldest.size;
        ++stats_.evictions;
        std::free(oldest.base);
    }
    lru_.push_back(Block{h, h->size});
    by_size_.emplace(h->size, std::prev(lru_.end()));
    stats_.cached_bytes += h->size;
    stats_.peak_cached_bytes = std::max(stats_.peak_cached_bytes, stats_.cached_bytes);
}

void CachingCpuAllocator::release_cached() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Block &b : lru_) std::free(b.base);
    lru_.clear();
    by_size_.clear();
    stats_.cached_bytes = 0;
}

CpuCacheStats CachingCpuAllocator::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
}

size_t cpu_cache_limit_from_env() {
    constexpr size_t kDefaultMb = 1024;
    const char *env = std::getenv("IPEX_CPU_CACHE_MB");
    if (!env || !*env) return kDefaultMb << 20;
    const std::string text(env);
    if (text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9) return kDefaultMb << 20;
    return static_cast<size_t>(std::stoull(text)) << 20;
}

namespace {

// Installed once per process image; never destroyed (tensors freed at exit still come back).
CachingCpuAllocator *install() {
    const size_t limit = cpu_cache_limit_from_env();
    if (limit == 0) return nullptr;
    auto *cache = new CachingCpuAllocator(limit);
    // Priority 1: above libtorch's default CPU allocator, below anything registered higher.
    c10::SetAllocator(c10::DeviceType::CPU, cache, 1);
    if (c10::GetAllocator(c10::DeviceType::CPU) != cache) {
        delete cache;
        return nullptr;
    }
    return cache;
}

CachingCpuAllocator *const g_installed = install();

}  // namespace

CachingCpuAllocator *installed_cpu_cache() { return g_installed; }

}  // namespace ipex::ops
