// The AVX2 + FMA build of the fused steps' loops (step_kernels.h): called only after isa::avx2_fma().
#include "train/step_kernels.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace ipex::train::avx2 {

#include "train/step_kernels.inc"

}  // namespace ipex::train::avx2
