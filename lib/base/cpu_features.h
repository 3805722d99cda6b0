// What the CPU offers and what this process may use: cpuid, XCR0 and the kernel's
// AMX permission (arch_prctl ARCH_REQ_XCOMP_PERM).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ipex {

struct CpuFeatures {
    std::string vendor;
    std::string model;  // brand string
    bool avx2 = false;
    bool avx_vnni = false;  // VEX-encoded VPDPBUSD (AVX2 CPUs without AVX-512, and newer ones)
    bool avx512f = false;
    bool avx512bw = false;
    bool avx512vl = false;
    bool avx512dq = false;
    bool avx512_vnni = false;
    bool avx512_bf16 = false;
    bool avx512_fp16 = false;
    bool amx_tile = false;
    bool amx_bf16 = false;
    bool amx_int8 = false;
    bool os_avx512 = false;       // XCR0 enables the AVX-512 state
    bool amx_permitted = false;   // the kernel granted AMX tile data to this process
    std::string amx_status;       // why AMX is or is not usable

    // (name, present) in the order `info` prints them.
    std::vector<std::pair<std::string, bool>> flags() const;
};

// Reads cpuid once; the AMX permission request is made on first call.
const CpuFeatures &cpu_features();

}  // namespace ipex
