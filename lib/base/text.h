// Small text helpers every command line shares. Torch-free.
#pragma once

#include <cstddef>
#include <string>

namespace ipex {

// Levenshtein distance (insertions, deletions and substitutions of one character), for the
// "did you mean" of an unknown command or option.
size_t edit_distance(const std::string &a, const std::string &b);

// `value` with `precision` digits after the point, as the text reports print numbers:
// fixed_text(2.5, 3) == "2.500".
std::string fixed_text(double value, int precision);

}  // namespace ipex
