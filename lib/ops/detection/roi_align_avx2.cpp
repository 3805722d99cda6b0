// The channels-last RoIAlign loop (roi_align_channels_last.h) built with AVX2 flags, so the
// compiler vectorizes it over eight channels; runs only after isa::avx2_fma().
#include "ops/detection/roi_align_channels_last.h"

namespace ipex::ops::detection::avx2 {

void run_channels_last(const ChannelsLastProblem &p) { channels_last(p); }

}  // namespace ipex::ops::detection::avx2
