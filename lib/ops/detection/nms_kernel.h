// Non-maximum suppression's inner loop, torch-free. The boxes are columns in score order (box i
// is the i-th highest score); a box not yet suppressed is kept and suppresses every later box
// whose IoU with it, inter / (area_i + area_j - inter), exceeds the threshold: torchvision's
// arithmetic in its order, so the kept set is the same to the last tie. fp32 builds: portable
// and AVX-512 (16 later boxes a step).
#pragma once

#include <cmath>
#include <cstdint>

namespace ipex::ops::detection {

template <typename T>
struct NmsProblem {
    const T *x1 = nullptr, *y1 = nullptr, *x2 = nullptr, *y2 = nullptr, *area = nullptr;
    int64_t n = 0;
    // For fp32 boxes: the largest float not above the threshold (ovr > it exactly when ovr >
    // the double threshold), see fp32_threshold.
    T threshold = 0;
    uint8_t *suppressed = nullptr;  // n flags, zero on entry
};

// The fp32 bound that makes an fp32 IoU compare with a double threshold as torchvision does.
inline float fp32_threshold(double threshold) {
    float t = static_cast<float>(threshold);
    if (static_cast<double>(t) > threshold) t = std::nextafter(t, -INFINITY);
    return t;
}

// Returns the number of kept boxes, writing their positions (in score order) to keep.
template <typename T>
int64_t suppress(const NmsProblem<T> &p, int64_t *keep) {
    int64_t kept = 0;
    for (int64_t i = 0; i < p.n; ++i) {
        if (p.suppressed[i]) continue;
        keep[kept++] = i;
        const T ix1 = p.x1[i], iy1 = p.y1[i], ix2 = p.x2[i], iy2 = p.y2[i], iarea = p.area[i];
        for (int64_t j = i + 1; j < p.n; ++j) {
            // std::max / std::min's choices (NaN included): max(a, b) = a < b ? b : a.
            const T xx1 = ix1 < p.x1[j] ? p.x1[j] : ix1, yy1 = iy1 < p.y1[j] ? p.y1[j] : iy1;
            const T xx2 = p.x2[j] < ix2 ? p.x2[j] : ix2, yy2 = p.y2[j] < iy2 ? p.y2[j] : iy2;
            const T w = T(0) < xx2 - xx1 ? xx2 - xx1 : T(0), h = T(0) < yy2 - yy1 ? yy2 - yy1 : T(0);
            const T inter = w * h;
            const T ovr = inter / (iarea + p.area[j] - inter);
            p.suppressed[j] |= static_cast<uint8_t>(ovr > p.threshold);
        }
    }
    return kept;
}

namespace avx512 {
bool nms_available();
int64_t suppress(const NmsProblem<float> &p, int64_t *keep);
}  // namespace avx512

}  // namespace ipex::ops::detection
