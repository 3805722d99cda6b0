// The instruction sets a kernel checks before it dispatches, asked one way everywhere.
// Header-only: the ops objects of libipex_ops.so (which link libtorch and oneDNN only) and the
// static libraries share it. Each answer is read once per process. `ipex-tool info` reports the
// whole picture (cpu_features.h: vendor, OS state, AMX permission). Not for files compiled with
// -mavx512* flags: an inline function emitted there may be the copy the linker keeps, and the
// check itself would then need the instructions it checks for.
#pragma once

#include <cpuid.h>
#include <unistd.h>

#include <cstdint>

namespace ipex::isa {

// The four registers of cpuid leaf/subleaf, all zero when the leaf is past the CPU's highest.
struct CpuidRegs {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};
inline CpuidRegs cpuid_regs(unsigned leaf, unsigned subleaf) {
    CpuidRegs r;
    if (!__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx)) return CpuidRegs{};
    return r;
}

// cpuid bit `bit` of register `reg` (0 eax, 1 ebx, 2 ecx, 3 edx) of leaf/subleaf; false when
// the leaf is past the CPU's highest.
inline bool cpuid_bit(unsigned leaf, unsigned subleaf, int reg, int bit) {
    const CpuidRegs r = cpuid_regs(leaf, subleaf);
    const unsigned value[4] = {r.eax, r.ebx, r.ecx, r.edx};
    return (value[reg] >> bit & 1u) != 0;
}

// AVX-512 F, BW and VL with FMA and F16C, the OS saving their state: what the own AVX-512
// kernels are compiled for.
inline bool avx512() {
    static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma") &&
                           cpuid_bit(1, 0, 2, 29);  // F16C (a name clang's builtin does not know)
    return ok;
}

// AVX2 (the OS saving the ymm state).
inline bool avx2() {
    static const bool ok = __builtin_cpu_supports("avx2");
    return ok;
}

// AVX2 with FMA (Haswell and later; every AVX-512 CPU too).
inline bool avx2_fma() {
    static const bool ok = avx2() && __builtin_cpu_supports("fma");
    return ok;
}

// avx512() and AVX512-BF16 (VDPBF16PS, VCVTNE2PS2BF16).
inline bool avx512_bf16() {
    static const bool ok = avx512() && __builtin_cpu_supports("avx512bf16");
    return ok;
}

// avx512() and AVX512-VNNI (VPDPBUSD on zmm registers).
inline bool avx512_vnni() {
    static const bool ok = avx512() && __builtin_cpu_supports("avx512vnni");
    return ok;
}

// AVX-VNNI: the VEX-encoded VPDPBUSD of AVX2 CPUs (cpuid leaf 7, subleaf 1, eax bit 4; clang 14
// has no __builtin_cpu_supports name for it).
inline bool avx_vnni() {
    static const bool ok = avx2() && cpuid_bit(7, 1, 0, 4);
    return ok;
}

// Either VNNI: u8 x s8 dot products without the 16-bit saturation of VPMADDUBSW.
inline bool vnni() { return avx512_vnni() || avx_vnni(); }

// AMX-BF16 in cpuid (leaf 7, edx bit 22): present, not necessarily permitted by the kernel.
inline bool amx_bf16_present() {
    static const bool ok = cpuid_bit(7, 0, 3, 22);
    return ok;
}

// One core's L2 cache in bytes (sysconf), 1 MiB when the system does not say. Not an
// instruction set, but asked by the same kernels when they size their blocks.
inline int64_t l2_cache_bytes() {
    static const int64_t bytes = [] {
        const long size = sysconf(_SC_LEVEL2_CACHE_SIZE);
        return size > 0 ? static_cast<int64_t>(size) : int64_t{1} << 20;
    }();
    return bytes;
}

// The last-level cache's bytes (the L3's, sysconf), 32 MiB when the system does not say.
inline int64_t l3_cache_bytes() {
    static const int64_t bytes = [] {
        const long size = sysconf(_SC_LEVEL3_CACHE_SIZE);
        return size > 0 ? static_cast<int64_t>(size) : int64_t{32} << 20;
    }();
    return bytes;
}

}  // namespace ipex::isa
