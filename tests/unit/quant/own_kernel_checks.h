// What the tests of the int8 own kernels (stem, pointwise) share: IPEX_CONV_KERNELS set for one
// scope (the contexts read it when they are made), and the check of a kernel's output bytes
// against the reference's values.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace ipex::quant {

// got (int64 values) against want: at most one step apart (the kernels' epilogue rounds in fp32,
// so a value at a rounding tie may land one step off), at most 0.1% of them; the 64 guard bytes
// after the output untouched; want not constant (a saturation bug would go unseen otherwise).
inline void expect_within_one_step(const at::Tensor &got, const at::Tensor &want, const at::Tensor &guard) {
    const at::Tensor diff = (got - want).abs();
    EXPECT_LE(diff.max().item<int64_t>(), 1);
    EXPECT_LE((diff > 0).sum().item<int64_t>() * 1000, diff.numel()) << "more than 0.1% of values off by one";
    EXPECT_TRUE(guard.eq(0x5a).all().item<bool>()) << "wrote past the output";
    EXPECT_GT(want.max().item<int64_t>(), want.min().item<int64_t>());
}

class KernelsVariable {
public:
    explicit KernelsVariable(const char *value) {
        const char *old = std::getenv("IPEX_CONV_KERNELS");
        had_ = old != nullptr;
        if (had_) old_ = old;
        setenv("IPEX_CONV_KERNELS", value, 1);
    }
    ~KernelsVariable() {
        if (had_) setenv("IPEX_CONV_KERNELS", old_.c_str(), 1);
        else unsetenv("IPEX_CONV_KERNELS");
    }

private:
    bool had_ = false;
    std::string old_;
};

}  // namespace ipex::quant
