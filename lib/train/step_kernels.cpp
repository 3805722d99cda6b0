// The portable build of the fused steps' loops (step_kernels.h).
#include "train/step_kernels.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace ipex::train::ref {

#include "train/step_kernels.inc"

}  // namespace ipex::train::ref
