// Memory a hot path reuses call after call. Declare one per use site `thread_local`: each
// thread then grows its own buffer to the largest size asked and keeps it, so steady-state calls
// allocate nothing (a fresh megabyte buffer is page-faulted and zeroed by the kernel on every
// call). 64-byte aligned; contents are not kept when it grows. Torch-free.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>

namespace ipex {

class ScratchBuffer {
public:
    static constexpr size_t kAlignment = 64;

    // At least `n` bytes, kAlignment-aligned.
    void *bytes(size_t n) {
        if (n > size_ || !data_) {
            const size_t size = (n + kAlignment - 1) / kAlignment * kAlignment;
            data_.reset(static_cast<unsigned char *>(std::aligned_alloc(kAlignment, size ? size : kAlignment)));
            if (!data_) throw std::bad_alloc();
            size_ = size;
        }
        return data_.get();
    }
    // Room for `count` elements of T.
    template <typename T>
    T *get(size_t count) {
        return static_cast<T *>(bytes(count * sizeof(T)));
    }

private:
    struct Free {
        void operator()(unsigned char *p) const { std::free(p); }
    };
    std::unique_ptr<unsigned char, Free> data_;
    size_t size_ = 0;
};

}  // namespace ipex
