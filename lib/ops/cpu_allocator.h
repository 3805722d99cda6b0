// A caching allocator for libtorch's large CPU tensors. glibc serves blocks above its mmap
// threshold (at most 32 MiB) with a fresh mmap and unmaps them on free, so every call of a
// model whose activations are that large faults each page of them in again: an fp32
// EfficientNet-B0 at batch 8 spent a third of its time in the kernel doing so. This allocator
// keeps freed blocks of at least `min_bytes` (up to `limit_bytes` of them, the least recently
// freed evicted first) and hands them out again for a request of the same size or up to a
// quarter smaller, so a model run again and again touches memory it already has. Fresh blocks
// of 32 MiB and more are advised transparent huge pages before their first touch (weights and
// embedding tables: fewer TLB misses on random rows).
//
// libipex_ops installs it for the CPU when it loads (any process that loads our ops: ipex-tool,
// a python with torch.ops.load_library). IPEX_CPU_CACHE_MB sets the limit in MiB (default
// 1024); 0 leaves libtorch's allocator alone.
#pragma once

#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>

namespace ipex::ops {

struct CpuCacheStats {
    int64_t hits = 0;          // requests served from the cache
    int64_t misses = 0;        // cacheable requests that allocated
    int64_t evictions = 0;     // cached blocks freed to make room
    size_t cached_bytes = 0;   // held now, free for reuse
    size_t peak_cached_bytes = 0;
};

class CachingCpuAllocator final : public c10::Allocator {
public:
    // Blocks of `min_bytes` or more are cached, at most `limit_bytes` of them at a time.
    CachingCpuAllocator(size_t limit_bytes, size_t min_bytes = kDefaultMinBytes);
    ~CachingCpuAllocator() override;
    CachingCpuAllocator(const CachingCpuAllocator &) = delete;
    CachingCpuAllocator &operator=(const CachingCpuAllocator &) = delete;

    c10::DataPtr allocate(size_t nbytes) const override;
    c10::DeleterFnPtr raw_deleter() const override { return &CachingCpuAllocator::release; }

    // Frees every cached block.
    void release_cached();
    CpuCacheStats stats() const;
    size_t limit_bytes() const { return limit_; }

    static constexpr size_t kDefaultMinBytes = size_t{64} << 10;
    static constexpr size_t kAlignment = 64;

private:
    struct Block {
        void *base;
        size_t size;
    };
    struct Header;  // before each block's data: its owner and size
    static void release(void *data);
    void give_back(Header *h);
    void free_block(void *base) const;

    const size_t limit_, min_;
    mutable std::mutex mu_;
    // Cached blocks, least recently freed first, and the same blocks by size.
    mutable std::list<Block> lru_;
    mutable std::multimap<size_t, std::list<Block>::iterator> by_size_;
    mutable CpuCacheStats stats_;
};

// The limit IPEX_CPU_CACHE_MB asks for, in bytes (default 1 GiB; 0: off). A value that is not a
// whole number of MiB is ignored with the default kept.
size_t cpu_cache_limit_from_env();

// The allocator libipex_ops installed for the CPU, or null (IPEX_CPU_CACHE_MB=0, or another
// allocator was registered with a higher priority first).
CachingCpuAllocator *installed_cpu_cache();

}  // namespace ipex::ops
