#include "base/isa_check.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <utility>

#include "base/errors.h"
#include "base/log.h"

namespace ipex {
namespace {

enum Feature : uint32_t {
    kSse41 = 1u << 0,
    kAvx = 1u << 1,
    kAvx2 = 1u << 2,
    kAvx2Vnni = 1u << 3,
    kAvx2Vnni2 = 1u << 4,
    kAvx512 = 1u << 5,
    kVnni512 = 1u << 6,
    kBf16 = 1u << 7,
    kFp16 = 1u << 8,
    kAmx = 1u << 9,
    kAmxFp16 = 1u << 10,
};

constexpr uint32_t kIsaSse41 = kSse41;
constexpr uint32_t kIsaAvx = kIsaSse41 | kAvx;
constexpr uint32_t kIsaAvx2 = kIsaAvx | kAvx2;
constexpr uint32_t kIsaAvx2Vnni = kIsaAvx2 | kAvx2Vnni;
constexpr uint32_t kIsaAvx2Vnni2 = kIsaAvx2Vnni | kAvx2Vnni2;
constexpr uint32_t kIsaAvx512 = kIsaAvx2 | kAvx512;
constexpr uint32_t kIsaAvx512Vnni = kIsaAvx512 | kVnni512;
constexpr uint32_t kIsaAvx512Bf16 = kIsaAvx512Vnni | kBf16;
constexpr uint32_t kIsaAvx512Fp16 = kIsaAvx512Bf16 | kFp16;
constexpr uint32_t kIsaAmx = kIsaAvx512Bf16 | kAmx;
constexpr uint32_t kIsaAmxFp16 = kIsaAmx | kFp16 | kAmxFp16;

// oneDNN ISA names (2.x and 3.x) and the features they imply.
const std::vector<std::pair<std::string, uint32_t>> &isa_table() {
    static const std::vector<std::pair<std::string, uint32_t>> table = {
        {"sse41", kIsaSse41},
        {"avx", kIsaAvx},
        {"avx2", kIsaAvx2},
        {"avx2_vnni", kIsaAvx2Vnni},
        {"avx2_vnni_2", kIsaAvx2Vnni2},
        {"avx512_core", kIsaAvx512},
        {"avx512_common", kIsaAvx512},
        {"avx512_core_vnni", kIsaAvx512Vnni},
        {"avx512_core_bf16", kIsaAvx512Bf16},
        {"avx512_core_fp16", kIsaAvx512Fp16},
        {"avx10_1_512", kIsaAvx512Fp16},
        {"avx512_core_amx", kIsaAmx},
        {"avx512_core_bf16_amx_int8", kIsaAmx},
        {"avx512_core_bf16_amx_bf16", kIsaAmx},
        {"avx512_core_amx_fp16", kIsaAmxFp16},
        {"avx10_1_512_amx", kIsaAmx | kFp16},
        {"avx10_1_512_amx_fp16", kIsaAmxFp16},
    };
    return table;
}

const std::vector<std::pair<std::string, std::string>> &aliases() {
    static const std::vector<std::pair<std::string, std::string>> table = {
        {"amx", "avx512_core_amx"},          {"amx_bf16", "avx512_core_amx"},
        {"amx_int8", "avx512_core_amx"},     {"amx_fp16", "avx512_core_amx_fp16"},
        {"avx512", "avx512_core"},           {"avx512_vnni", "avx512_core_vnni"},
        {"avx512_bf16", "avx512_core_bf16"}, {"avx512_fp16", "avx512_core_fp16"},
    };
    return table;
}

// Features of an ISA name; names oneDNN may add later are read by their parts.
uint32_t features_of(const std::string &isa) {
    for (const auto &[name, bits] : isa_table())
        if (name == isa) return bits;
    if (isa.empty()) return 0;
    auto has = [&](const char *part) { return isa.find(part) != std::string::npos; };
    uint32_t bits = kIsaSse41;
    if (has("avx")) bits |= kIsaAvx;
    if (has("avx2")) bits |= kIsaAvx2;
    if (has("avx512") || has("avx10")) bits |= kIsaAvx512;
    if (bits & kAvx512) {
        if (has("vnni")) bits |= kIsaAvx512Vnni;
        if (has("bf16")) bits |= kIsaAvx512Bf16;
        if (has("fp16") || has("avx10")) bits |= kIsaAvx512Fp16;
    }
    if (has("amx")) bits |= kIsaAmx;
    if (has("amx_fp16")) bits |= kIsaAmxFp16;
    return bits;
}

}  // namespace

std::vector<std::string> accepted_isa_names() {
    std::vector<std::string> names;
    for (const auto &a : aliases()) names.push_back(a.first);
    for (const auto &entry : isa_table()) names.push_back(entry.first);
    return names;
}

std::string canonical_isa(const std::string &name, const std::string &flag) {
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (const auto &[alias, isa] : aliases())
        if (alias == lower) return isa;
    for (const auto &entry : isa_table())
        if (entry.first == lower) return lower;
    std::string list;
    for (const auto &n : accepted_isa_names()) list += (list.empty() ? "" : ", ") + n;
    throw_usage(flag + " " + name + ": unknown ISA; use one of " + list);
}

bool isa_satisfies(const std::string &impl_isa, const std::string &required) {
    const uint32_t have = features_of(impl_isa);
    const uint32_t need = features_of(required);
    return have != 0 && (have & need) == need;
}

double compute_share_satisfying(const VerboseStats &stats, const std::string &required) {
    double total = 0.0, on = 0.0;
    for (const auto &[key, entry] : stats.by_kind_impl) {
        if (!is_compute_kind(key.first)) continue;
        // Every line weighs a little so sub-resolution times still count.
        const double w = entry.ms + 1e-6 * entry.count;
        total += w;
        if (isa_satisfies(isa_of_impl(key.second), required)) on += w;
    }
    return total > 0.0 ? on / total : 0.0;
}

}  // namespace ipex
