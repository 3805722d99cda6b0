// Shared helpers of the weight-only kernel tests.
#pragma once

#include "checkpoint/woq_format.h"
#include "ops/woq/woq_kernels.h"
#include "ops/woq/woq_layout.h"

namespace ipex::woq::testing {

// The kernels' view of a layer's tensors.
inline kernels::WeightView view_of(const WoqLayer &l) {
    kernels::WeightView w;
    w.qweight = l.qweight.data_ptr<uint8_t>();
    w.scales = l.scales.data_ptr<float>();
    w.zeros = l.zeros.data_ptr<float>();
    w.n = l.out_features;
    w.k = l.in_features;
    w.kp = padded_in_features(w.k);
    w.groups = l.groups();
    w.group_size = l.group_size;
    w.bits = l.bits;
    return w;
}

}  // namespace ipex::woq::testing
