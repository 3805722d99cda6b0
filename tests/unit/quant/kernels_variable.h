// IPEX_CONV_KERNELS set for one scope, for the tests of the int8 contexts' own kernels (the
// contexts read it when they are made).
#pragma once

#include <cstdlib>
#include <string>

namespace ipex::quant {

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
