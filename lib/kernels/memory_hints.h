// Cache hints for kernels that stream through more memory than the caches hold. Header-only,
// torch-free; x86-64 instructions every x86-64 CPU has (SSE), a plain form elsewhere.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ipex::kernels {

// Asks for the cache line holding p, for a read soon and not again. An asm statement, not
// __builtin_prefetch: GCC 12 treats the builtin as free of effects and deleted whole prefetch
// loops whose results nothing else used (the merged EmbeddingBag's look-ahead compiled to no
// instruction at all).
inline void prefetch_once(const void *p) {
#if defined(__x86_64__)
    asm volatile("prefetchnta %0" : : "m"(*static_cast<const char *>(p)));
#else
    __builtin_prefetch(p, 0, 0);
#endif
}

// dst[0, n) = src[0, n), written around the caches (non-temporal stores) where dst is 16-byte
// aligned: an output larger than the last-level cache is then written once, not read first and
// written back later. The values are the same as a copy's. Call store_fence() before another
// thread reads dst.
inline void copy_streaming(float *dst, const float *src, int64_t n) {
    int64_t k = 0;
#if defined(__x86_64__)
    if (reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
        for (; k + 4 <= n; k += 4) _mm_stream_ps(dst + k, _mm_loadu_ps(src + k));
    }
#endif
    std::memcpy(dst + k, src + k, static_cast<size_t>(n - k) * sizeof(float));
}

// Orders the non-temporal stores before it ahead of every store after it.
inline void store_fence() {
#if defined(__x86_64__)
    _mm_sfence();
#endif
}

}  // namespace ipex::kernels
