// Sizes as text, header-only so that the ops objects (which link libtorch and oneDNN only) use
// the same spelling as the rest of the tool.
#pragma once

#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string>

namespace ipex {

// Sizes written the way SPECs take them: "16x3x224x224" ("" for none); `sep` for other lists
// ("1, 0, 3").
inline std::string format_sizes(c10::IntArrayRef sizes, const char *sep = "x") {
    std::string out;
    for (size_t i = 0; i < sizes.size(); ++i) out += (i ? sep : "") + std::to_string(sizes[i]);
    return out;
}

}  // namespace ipex
