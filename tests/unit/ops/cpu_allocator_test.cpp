// The caching CPU allocator: reuse of freed blocks by size, the limit and its eviction order,
// alignment, small blocks passed through, concurrent use, and its installation for libtorch.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "ops/cpu_allocator.h"

namespace ipex::ops {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

bool aligned(const void *p) { return reinterpret_cast<uintptr_t>(p) % CachingCpuAllocator::kAlignment == 0; }

// The THPeligible field of the mapping that holds `address` in /proc/self/smaps: 1 where the
// kernel may back it with transparent huge pages; -1 when not found.
int thp_eligible(const void *address) {
    std::ifstream smaps("/proc/self/smaps");
    const auto at = reinterpret_cast<uintptr_t>(address);
    std::string line;
    bool inside = false;
    while (std::getline(smaps, line)) {
        uintptr_t lo = 0, hi = 0;
        if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find(' ')) {
            inside = lo <= at && at < hi;
        } else if (inside && line.rfind("THPeligible:", 0) == 0) {
            return std::atoi(line.c_str() + std::strlen("THPeligible:"));
        }
    }
    return -1;
}

// Blocks of 32 MiB and more are advised to use transparent huge pages before their first touch
// (where THP is "madvise", nothing else would get them).
TEST(CpuAllocator, LargeBlocksAreAdvisedHugePages) {
    std::ifstream mode_file("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string mode((std::istreambuf_iterator<char>(mode_file)), std::istreambuf_iterator<char>());
    if (mode.find("[madvise]") == std::string::npos)
        GTEST_SKIP() << "transparent huge pages are not in madvise mode here: '" << mode << "'";
    CachingCpuAllocator allocator(0);
    const c10::DataPtr large = allocator.allocate(size_t{64} << 20);
    const char *middle = static_cast<const char *>(large.get()) + (size_t{32} << 20);
    if (thp_eligible(middle) == -1) GTEST_SKIP() << "no THPeligible field in /proc/self/smaps";
    EXPECT_EQ(thp_eligible(middle), 1);
}

TEST(CpuAllocator, ReusesAFreedBlockOfTheSameSize) {
    CachingCpuAllocator cache(64 * kMiB);
    void *first = nullptr;
    {
        c10::DataPtr a = cache.allocate(3 * kMiB + 5);
        first = a.get();
        std::memset(a.get(), 1, 3 * kMiB + 5);
    }
    EXPECT_EQ(cache.stats().misses, 1);
    EXPECT_EQ(cache.stats().cached_bytes, 3 * kMiB + 4096);  // rounded up to whole pages
    c10::DataPtr b = cache.allocate(3 * kMiB + 5);
    EXPECT_EQ(b.get(), first);
    EXPECT_EQ(cache.stats().hits, 1);
    EXPECT_EQ(cache.stats().cached_bytes, 0u);
    EXPECT_EQ(b.device(), c10::Device(c10::DeviceType::CPU));
}

TEST(CpuAllocator, ServesSmallerRequestsUpToAQuarterSmaller) {
    CachingCpuAllocator cache(64 * kMiB);
    void *block = nullptr;
    { block = cache.allocate(8 * kMiB).get(); }
    {
        c10::DataPtr tiny = cache.allocate(4 * kMiB);  // half the size: not this block
        EXPECT_NE(tiny.get(), block);
    }
    // The 4 MiB block is cached now too; a 7 MiB request takes the 8 MiB one (within a quarter).
    c10::DataPtr seven = cache.allocate(7 * kMiB);
    EXPECT_EQ(seven.get(), block);
    c10::DataPtr nine = cache.allocate(9 * kMiB);  // larger than any cached block
    EXPECT_NE(nine.get(), block);
    EXPECT_EQ(cache.stats().hits, 1);
    EXPECT_EQ(cache.stats().misses, 3);
}

TEST(CpuAllocator, KeepsAtMostTheLimitEvictingTheLeastRecentlyFreed) {
    CachingCpuAllocator cache(10 * kMiB);
    c10::DataPtr a = cache.allocate(4 * kMiB), b = cache.allocate(4 * kMiB), c = cache.allocate(4 * kMiB);
    void *pa = a.get(), *pc = c.get();
    a.clear();  // freed first
    b.clear();
    EXPECT_EQ(cache.stats().cached_bytes, 8 * kMiB);
    c.clear();  // 12 MiB would exceed the limit: a goes
    EXPECT_EQ(cache.stats().cached_bytes, 8 * kMiB);
    EXPECT_EQ(cache.stats().evictions, 1);
    EXPECT_LE(cache.stats().peak_cached_bytes, 10 * kMiB);
    // The most recently freed block of a size is not preferred over another, but a is gone.
    std::vector<c10::DataPtr> again;
    for (int i = 0; i < 2; ++i) again.push_back(cache.allocate(4 * kMiB));
    for (const auto &p : again) EXPECT_NE(p.get(), pa);
    EXPECT_TRUE(again[0].get() == pc || again[1].get() == pc);
    // A block larger than the whole limit is never cached.
    { c10::DataPtr huge = cache.allocate(11 * kMiB); }
    EXPECT_EQ(cache.stats().cached_bytes, 0u);
}

TEST(CpuAllocator, PassesSmallBlocksThroughAndAlignsEveryBlock) {
    CachingCpuAllocator cache(64 * kMiB, 256 << 10);
    for (size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{4096}, size_t{256 << 10} - 1, size_t{256 << 10}, 5 * kMiB + 3}) {
        c10::DataPtr p = cache.allocate(n);
        ASSERT_NE(p.get(), nullptr) << n;
        EXPECT_TRUE(aligned(p.get())) << n;
        if (n > 0) static_cast<char *>(p.get())[n - 1] = 7;
    }
    const CpuCacheStats s = cache.stats();
    EXPECT_EQ(s.hits + s.misses, 2);  // only the two blocks of 256 KiB and more
    EXPECT_EQ(s.cached_bytes, (256u << 10) + 5 * kMiB + 4096);
    cache.release_cached();
    EXPECT_EQ(cache.stats().cached_bytes, 0u);
}

// raw_allocate (libtorch's mkldnn and other code paths use it) needs the context to be the
// data pointer, and raw_deallocate a deleter.
TEST(CpuAllocator, RawAllocateAndDeallocate) {
    CachingCpuAllocator cache(64 * kMiB);
    void *big = cache.raw_allocate(2 * kMiB), *small = cache.raw_allocate(100);
    ASSERT_NE(big, nullptr);
    EXPECT_TRUE(aligned(big) && aligned(small));
    cache.raw_deallocate(big);
    cache.raw_deallocate(small);
    EXPECT_EQ(cache.stats().cached_bytes, 2 * kMiB);
    c10::DataPtr again = cache.allocate(2 * kMiB);
    EXPECT_EQ(again.get(), big);
    EXPECT_EQ(again.get_context(), again.get());
}

TEST(CpuAllocator, ZeroLimitCachesNothing) {
    CachingCpuAllocator cache(0);
    { c10::DataPtr a = cache.allocate(4 * kMiB); }
    EXPECT_EQ(cache.stats().cached_bytes, 0u);
    EXPECT_EQ(cache.stats().misses, 0);
}

TEST(CpuAllocator, ConcurrentUseKeepsEveryBlockDistinctAndAccounted) {
    CachingCpuAllocator cache(32 * kMiB);
    std::atomic<int> bad{0};
    auto work = [&](int seed) {
        for (int i = 0; i < 200; ++i) {
            const size_t n = (1 + (i + seed) % 5) * kMiB;
            c10::DataPtr a = cache.allocate(n), b = cache.allocate(n);
            auto *pa = static_cast<unsigned char *>(a.get()), *pb = static_cast<unsigned char *>(b.get());
            std::memset(pa, seed, n);
            std::memset(pb, seed + 1, n);
            if (pa == pb || pa[n - 1] != static_cast<unsigned char>(seed) || pb[0] != static_cast<unsigned char>(seed + 1))
                ++bad;
        }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back(work, t * 16);
    for (auto &t : threads) t.join();
    EXPECT_EQ(bad.load(), 0);
    const CpuCacheStats s = cache.stats();
    EXPECT_EQ(s.hits + s.misses, 4 * 200 * 2);
    EXPECT_GT(s.hits, 0);
    EXPECT_LE(s.cached_bytes, 32 * kMiB);
}

TEST(CpuAllocator, LimitFromTheEnvironment) {
    const char *saved = std::getenv("IPEX_CPU_CACHE_MB");
    const std::string keep = saved ? saved : "";
    setenv("IPEX_CPU_CACHE_MB", "0", 1);
    EXPECT_EQ(cpu_cache_limit_from_env(), 0u);
    setenv("IPEX_CPU_CACHE_MB", "300", 1);
    EXPECT_EQ(cpu_cache_limit_from_env(), 300 * kMiB);
    for (const char *bad : {"-1", "1.5", "lots", "12x", "99999999999"}) {
        setenv("IPEX_CPU_CACHE_MB", bad, 1);
        EXPECT_EQ(cpu_cache_limit_from_env(), 1024 * kMiB) << bad;
    }
    unsetenv("IPEX_CPU_CACHE_MB");
    EXPECT_EQ(cpu_cache_limit_from_env(), 1024 * kMiB);
    if (saved) setenv("IPEX_CPU_CACHE_MB", keep.c_str(), 1);
}

// libtorch's CPU tensors come from the installed cache (unless the environment turned it off
// for this process): an activation-sized tensor freed and made again reuses its memory.
TEST(CpuAllocator, InstalledForLibtorchTensors) {
    CachingCpuAllocator *cache = installed_cpu_cache();
    if (cpu_cache_limit_from_env() == 0) {
        EXPECT_EQ(cache, nullptr);
        GTEST_SKIP() << "IPEX_CPU_CACHE_MB=0 in this environment: the cache is off";
    }
    ASSERT_NE(cache, nullptr);
    EXPECT_EQ(c10::GetAllocator(c10::DeviceType::CPU), cache);
    const void *first = nullptr;
    {
        at::Tensor t = at::ones({8, 96, 112, 112});  // 38.5 MB, above glibc's largest mmap threshold
        first = t.data_ptr();
    }
    const int64_t hits = cache->stats().hits;
    at::Tensor again = at::zeros({8, 96, 112, 112});
    EXPECT_EQ(again.data_ptr(), first);
    EXPECT_EQ(cache->stats().hits, hits + 1);
    EXPECT_EQ(again.sum().item<float>(), 0.0f);
}

}  // namespace
}  // namespace ipex::ops
