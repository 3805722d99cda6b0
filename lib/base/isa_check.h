// --require-isa: does an instance's oneDNN compute time run on an ISA at least as
// capable as the one asked for? ISAs are compared by the features they imply
// (avx512_core_amx implies avx512_core_bf16, which implies avx512_core_vnni, ...).
#pragma once

#include <string>
#include <vector>

#include "base/onednn_verbose.h"

namespace ipex {

// Names --require-isa accepts: oneDNN's ISA names and short aliases (amx, avx512_bf16...).
std::vector<std::string> accepted_isa_names();

// oneDNN name for a user's ISA name ("amx" -> "avx512_core_amx"). Throws Error(usage)
// naming `flag` and the accepted names for an unknown one.
std::string canonical_isa(const std::string &name, const std::string &flag = "--require-isa");

// Whether code built for `impl_isa` (as isa_of_impl returns it) has every feature of
// `required` (a canonical name). An empty impl_isa (ref, gemm:jit...) satisfies nothing.
bool isa_satisfies(const std::string &impl_isa, const std::string &required);

// Share of convolution/matmul/inner-product/deconvolution/rnn time spent on
// implementations that satisfy `required`; 0 when no compute primitive ran.
double compute_share_satisfying(const VerboseStats &stats, const std::string &required);

}  // namespace ipex
