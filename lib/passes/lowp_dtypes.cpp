#include "passes/lowp_dtypes.h"

#include <c10/util/Exception.h>

#include <vector>

namespace ipex::passes {
namespace {

constexpr int kMaxTracked = 64;  // bits in the mask; ScalarType values are far below

uint64_t bit(at::ScalarType type) {
    const int index = static_cast<int>(type);
    TORCH_INTERNAL_ASSERT(index >= 0 && index < kMaxTracked, "dtype index out of range");
    return uint64_t(1) << index;
}

std::vector<at::ScalarType> members(uint64_t bits) {
    std::vector<at::ScalarType> out;
    for (int i = 0; i < static_cast<int>(at::ScalarType::NumOptions) && i < kMaxTracked; ++i)
        if (bits & (uint64_t(1) << i)) out.push_back(static_cast<at::ScalarType>(i));
    return out;
}

uint64_t all_bits() {
    uint64_t bits = 0;
    for (int i = 0; i < static_cast<int>(at::ScalarType::NumOptions) && i < kMaxTracked; ++i)
        bits |= uint64_t(1) << i;
    return bits;
}

}  // namespace

DtypeSet DtypeSet::of(at::ScalarType type) { return DtypeSet(bit(type)); }

DtypeSet DtypeSet::any() { return DtypeSet(all_bits()); }

DtypeSet DtypeSet::floating() {
    return DtypeSet(bit(at::kHalf) | bit(at::kBFloat16) | bit(at::kFloat) | bit(at::kDouble));
}

bool DtypeSet::contains(at::ScalarType type) const { return (bits_ & bit(type)) != 0; }

DtypeSet DtypeSet::promote(const DtypeSet &other) const {
    if (empty()) return other;
    if (other.empty()) return *this;
    if (*this == any() || other == any()) return any();
    uint64_t bits = bits_ | other.bits_;  // the dimensioned operand's dtype may win
    try {
        for (const auto a : members(bits_))
            for (const auto b : members(other.bits_)) bits |= bit(c10::promoteTypes(a, b));
    } catch (const c10::Error &) {
        return any();  // quantized or other dtypes without a promotion rule
    }
    return DtypeSet(bits);
}

DtypeSet DtypeSet::promote_with_scalar(bool is_floating_scalar) const {
    if (*this == any()) return any();
    uint64_t bits = bits_;
    for (const auto a : members(bits_)) {
        if (is_floating_scalar && !c10::isFloatingType(a)) bits = (bits & ~bit(a)) | bit(at::kFloat);
        if (!is_floating_scalar && a == at::kBool) bits = (bits & ~bit(a)) | bit(at::kLong);
    }
    return DtypeSet(bits);
}

std::string DtypeSet::to_string() const {
    if (*this == any()) return "{any}";
    std::string out = "{";
    for (const auto type : members(bits_)) {
        if (out.size() > 1) out += ",";
        out += c10::toString(type);
    }
    return out + "}";
}

}  // namespace ipex::passes
