// The requantizing epilogue of the own int8 convolution kernels (int8_stem.h,
// int8_pointwise.h): what follows the per-channel scale and shift of the int32 sums, as
// oneDNN's int8 convolutions compute it (relu, a residual sum of another quantized tensor, relu,
// the output zero point, rounding to nearest even, saturation).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace ipex::quant::vnni {

// The numbers after the per-channel scale and shift, the same for every output of an op.
struct Epilogue {
    bool relu = false;      // before the sum
    bool sum = false;       // add sum_scale x (the summand's byte - sum_zero_point)
    bool sum_s8 = false;    // the summand's bytes are s8
    bool sum_relu = false;  // after the sum
    bool out_s8 = false;
    float sum_scale = 1.f, sum_shift = 0.f;  // sum_shift = -sum_scale x sum_zero_point
    float out_zero_point = 0.f;
};

// The epilogue with its constants folded, as the kernels compute it: y = acc x scale + shift
// (each channel's shift plus shift_add), [relu, + add_after_relu] (relu before a sum only),
// [+ sum_scale x the summand's byte], at least lo (the output type's lowest value, or the zero
// point where a relu comes last), rounded and saturated to the output type: the output byte,
// zero point included.
struct Folded {
    float shift_add = 0.f, add_after_relu = 0.f, sum_scale = 1.f, lo = 0.f;
    bool out_s8 = false;
    // Every y the epilogue can meet lies below 2^31 (set by the plan from its scales, shifts and
    // the largest accumulator: in_int32_range), so its conversion to int32 cannot overflow and
    // the int32 -> int16 -> 8-bit saturating packs give the output bytes; otherwise the kernels
    // clamp y to the type's top in fp32 first.
    bool in_int32 = false;
};

inline Folded fold(const Epilogue &e) {
    Folded f;
    const float out_lo = e.out_s8 ? -128.f : 0.f;
    const float constant = e.out_zero_point + (e.sum ? e.sum_shift : 0.f);
    const bool relu_before_sum = e.sum && e.relu;
    (relu_before_sum ? f.add_after_relu : f.shift_add) = constant;
    const bool last_relu = e.sum ? e.sum_relu : e.relu;
    f.lo = last_relu && e.out_zero_point > out_lo ? e.out_zero_point : out_lo;
    f.out_s8 = e.out_s8;
    f.sum_scale = e.sum_scale;
    return f;
}

// Whether every y of the folded epilogue stays below 2^31 when each accumulator is at most
// acc_bound in magnitude: y = acc x scale + shift per channel, [max(y, 0) + add_after_relu],
// [+ sum_scale x a byte], with room for fp32's rounding of each step.
inline bool in_int32_range(const Folded &f, double acc_bound, const std::vector<float> &scale,
                           const std::vector<float> &shift) {
    double top = 0.0;
    for (size_t c = 0; c < scale.size() && c < shift.size(); ++c)
        top = std::max(top, std::abs(static_cast<double>(scale[c])) * acc_bound + static_cast<double>(shift[c]));
    top += std::abs(static_cast<double>(f.add_after_relu)) + std::abs(static_cast<double>(f.sum_scale)) * 255.0;
    return std::isfinite(top) && top * (1.0 + 1e-5) + 1.0 < 2147483520.0;  // the largest fp32 below 2^31
}

}  // namespace ipex::quant::vnni
