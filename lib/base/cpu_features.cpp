#include "base/cpu_features.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "base/isa.h"

namespace ipex {
namespace {

constexpr long kArchGetXcompPerm = 0x1022;
constexpr long kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureXtiledata = 18;

bool bit(unsigned value, int n) { return (value >> n) & 1u; }

unsigned long long xgetbv0() {
    unsigned eax = 0, edx = 0;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return (static_cast<unsigned long long>(edx) << 32) | eax;
}

CpuFeatures detect() {
    CpuFeatures f;
    const isa::CpuidRegs r0 = isa::cpuid_regs(0, 0);
    char vendor[13] = {};
    std::memcpy(vendor, &r0.ebx, 4);
    std::memcpy(vendor + 4, &r0.edx, 4);
    std::memcpy(vendor + 8, &r0.ecx, 4);
    f.vendor = vendor;

    // Leaves past the CPU's highest read as zeros: no brand string, no feature bits.
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
        const isa::CpuidRegs r = isa::cpuid_regs(0x80000002 + i, 0);
        std::memcpy(brand + 16 * i, &r, 16);
    }
    std::string model = brand;
    while (!model.empty() && model.back() == ' ') model.pop_back();
    while (!model.empty() && model.front() == ' ') model.erase(model.begin());
    f.model = model;

    const isa::CpuidRegs r1 = isa::cpuid_regs(1, 0);
    const bool osxsave = bit(r1.ecx, 27);
    const unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
    const bool os_avx = (xcr0 & 0x6) == 0x6;
    f.os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
    const bool os_amx = (xcr0 & (3ull << 17)) == (3ull << 17);

    const isa::CpuidRegs r7 = isa::cpuid_regs(7, 0);
    f.avx2 = os_avx && bit(r7.ebx, 5);
    f.avx512f = f.os_avx512 && bit(r7.ebx, 16);
    f.avx512dq = f.os_avx512 && bit(r7.ebx, 17);
    f.avx512bw = f.os_avx512 && bit(r7.ebx, 30);
    f.avx512vl = f.os_avx512 && bit(r7.ebx, 31);
    f.avx512_vnni = f.os_avx512 && bit(r7.ecx, 11);
    f.avx512_fp16 = f.os_avx512 && bit(r7.edx, 23);
    f.amx_bf16 = bit(r7.edx, 22);
    f.amx_tile = bit(r7.edx, 24);
    f.amx_int8 = bit(r7.edx, 25);
    if (r7.eax >= 1) {
        const isa::CpuidRegs r71 = isa::cpuid_regs(7, 1);
        f.avx512_bf16 = f.os_avx512 && bit(r71.eax, 5);
        f.avx_vnni = os_avx && bit(r71.eax, 4);
    }

    if (!f.amx_tile) {
        f.amx_status = "the CPU has no AMX";
    } else if (!os_amx) {
        f.amx_status = "the kernel does not enable AMX state (XCR0)";
    } else {
        unsigned long long perm = 0;
        syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata);
        if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &perm) == 0 &&
            (perm & (1ull << kXfeatureXtiledata))) {
            f.amx_permitted = true;
            f.amx_status = "granted";
        } else {
            f.amx_status = "the kernel refused AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM; Linux >= 5.16 needed)";
        }
    }
    return f;
}

}  // namespace

std::vector<std::pair<std::string, bool>> CpuFeatures::flags() const {
    return {{"avx2", avx2},         {"avx_vnni", avx_vnni},       {"avx512f", avx512f},
            {"avx512bw", avx512bw}, {"avx512vl", avx512vl},       {"avx512dq", avx512dq},
            {"avx512_vnni", avx512_vnni}, {"avx512_bf16", avx512_bf16}, {"avx512_fp16", avx512_fp16},
            {"amx_tile", amx_tile}, {"amx_bf16", amx_bf16},       {"amx_int8", amx_int8}};
}

const CpuFeatures &cpu_features() {
    static const CpuFeatures features = detect();
    return features;
}

}  // namespace ipex
