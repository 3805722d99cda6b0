// Static dtype propagation for cast_to_lowp: each tensor value carries the set of dtypes it
// may have at run time. Sets only ever over-approximate: a cast is skipped when the set
// proves it useless, and guarded by a run-time dtype check when the set cannot tell.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

namespace ipex::passes {

class DtypeSet {
public:
    DtypeSet() = default;  // empty: no tensor reaches here
    static DtypeSet of(at::ScalarType type);
    static DtypeSet any();             // nothing known
    static DtypeSet floating();        // fp16, bf16, fp32, fp64

    bool empty() const { return bits_ == 0; }
    bool contains(at::ScalarType type) const;
    bool subset_of(const DtypeSet &other) const { return (bits_ & ~other.bits_) == 0; }
    bool is_only(at::ScalarType type) const { return bits_ == of(type).bits_; }
    bool may_be_floating() const { return !(*this & floating()).empty(); }
    bool all_floating() const { return !empty() && subset_of(floating()); }

    DtypeSet operator|(const DtypeSet &other) const { return DtypeSet(bits_ | other.bits_); }
    DtypeSet operator&(const DtypeSet &other) const { return DtypeSet(bits_ & other.bits_); }
    DtypeSet without(at::ScalarType type) const { return DtypeSet(bits_ & ~of(type).bits_); }
    bool operator==(const DtypeSet &other) const { return bits_ == other.bits_; }
    bool operator!=(const DtypeSet &other) const { return bits_ != other.bits_; }

    // Result dtypes of a type-promoting op on operands from *this and `other` when their
    // ranks are unknown (a 0-dim operand of the same category does not promote).
    DtypeSet promote(const DtypeSet &other) const;
    // Result dtypes when the other operand is a Python number: float or int (bool counts as int).
    DtypeSet promote_with_scalar(bool is_floating_scalar) const;

    std::string to_string() const;

private:
    explicit DtypeSet(uint64_t bits) : bits_(bits) {}
    uint64_t bits_ = 0;
};

}  // namespace ipex::passes
