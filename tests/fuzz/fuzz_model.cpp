// Fuzz target: model files. Any bytes yield a model or an ipex error (bad input or
// unsupported), never a crash.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>

#include "base/errors.h"
#include "model/load.h"

// Damaged length fields make libtorch's unpickler and zip reader ask for whatever size they
// hold. On a real machine an absurd request fails with std::bad_alloc, which load_model reports
// as exit 3 (tested in e2e); under AddressSanitizer a failed `new` is fatal instead, and a
// granted one of gigabytes is touched and counted against the fuzzer's memory limit. This
// binary therefore gives every allocation above kAllocationCap the real machine's answer. No
// input here is larger than a few hundred kilobytes, so nothing legitimate comes near the cap.
namespace {
constexpr std::size_t kAllocationCap = std::size_t{256} << 20;

void *allocate(std::size_t size, std::size_t align) {
    if (size > kAllocationCap) return nullptr;
    if (align <= alignof(std::max_align_t)) return std::malloc(size == 0 ? 1 : size);
    void *p = nullptr;
    return ::posix_memalign(&p, align, size == 0 ? align : size) == 0 ? p : nullptr;
}
void *allocate_or_throw(std::size_t size, std::size_t align) {
    void *p = allocate(size, align);
    if (!p) throw std::bad_alloc();
    return p;
}
}  // namespace

void *operator new(std::size_t n) { return allocate_or_throw(n, 0); }
void *operator new[](std::size_t n) { return allocate_or_throw(n, 0); }
void *operator new(std::size_t n, std::align_val_t a) { return allocate_or_throw(n, static_cast<std::size_t>(a)); }
void *operator new[](std::size_t n, std::align_val_t a) { return allocate_or_throw(n, static_cast<std::size_t>(a)); }
void *operator new(std::size_t n, const std::nothrow_t &) noexcept { return allocate(n, 0); }
void *operator new[](std::size_t n, const std::nothrow_t &) noexcept { return allocate(n, 0); }
void *operator new(std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
    return allocate(n, static_cast<std::size_t>(a));
}
void *operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t &) noexcept {
    return allocate(n, static_cast<std::size_t>(a));
}
void operator delete(void *p) noexcept { std::free(p); }
void operator delete[](void *p) noexcept { std::free(p); }
void operator delete(void *p, std::size_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t) noexcept { std::free(p); }
void operator delete(void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { std::free(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { std::free(p); }

// After a recovered loader crash libtorch's state is not trusted, and its static destructors
// may wait on a lock a skipped frame held: a process that recovered one leaves without running
// them. Only then: every other exit keeps its status (a crash or an out-of-memory report exits
// through its own path with its own code).
extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    std::atexit([] {
        if (ipex::model::loader_crashes_recovered() > 0) std::_Exit(0);
    });
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // A crash inside libtorch's own loader is reported by load_model as exit 3 (the CLI ends
    // there); here it comes back as that Error so that fuzzing goes on past it.
    ipex::model::set_loader_crash_recovery(true);
    static const std::string path = "/tmp/ipex-fuzz-model-" + std::to_string(::getpid()) + ".pt";
    {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char *>(data), static_cast<std::streamsize>(size));
    }
    try {
        ipex::model::load_model(path);
    } catch (const ipex::Error &e) {
        if (e.code() != ipex::ExitCode::bad_input && e.code() != ipex::ExitCode::unsupported) __builtin_trap();
    }
    std::remove(path.c_str());
    return 0;
}
