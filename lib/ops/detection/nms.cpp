#include <vector>

#include "base/isa.h"
#include "ops/detection/detection_ops.h"
#include "ops/detection/nms_kernel.h"
#include "ops/op_errors.h"

namespace ipex::ops::detection {

namespace avx512 {
bool nms_available() { return isa::avx512(); }
}  // namespace avx512

namespace {

constexpr const char *kOp = "nms";

// The boxes' columns in score order and their areas, (x2 - x1) * (y2 - y1) as torchvision
// computes them; returns the kept boxes' original indices.
template <typename T>
at::Tensor run(const at::Tensor &boxes, const at::Tensor &order, double iou_threshold) {
    const int64_t n = boxes.size(0);
    const at::Tensor sorted = boxes.to(c10::CppTypeToScalarType<T>::value).index_select(0, order).t().contiguous();
    const at::Tensor area = (sorted[2] - sorted[0]) * (sorted[3] - sorted[1]);
    std::vector<uint8_t> suppressed(static_cast<size_t>(n), 0);
    std::vector<int64_t> keep(static_cast<size_t>(n));
    NmsProblem<T> p;
    p.x1 = sorted[0].data_ptr<T>();
    p.y1 = sorted[1].data_ptr<T>();
    p.x2 = sorted[2].data_ptr<T>();
    p.y2 = sorted[3].data_ptr<T>();
    p.area = area.data_ptr<T>();
    p.n = n;
    p.suppressed = suppressed.data();
    int64_t kept = 0;
    if constexpr (std::is_same_v<T, float>) {
        p.threshold = fp32_threshold(iou_threshold);
        kept = avx512::nms_available() ? avx512::suppress(p, keep.data()) : suppress(p, keep.data());
    } else {
        p.threshold = iou_threshold;
        kept = suppress(p, keep.data());
    }
    at::Tensor out = at::empty({kept}, boxes.options().dtype(at::kLong));
    const int64_t *order_data = order.data_ptr<int64_t>();
    int64_t *dst = out.data_ptr<int64_t>();
    for (int64_t i = 0; i < kept; ++i) dst[i] = order_data[keep[i]];
    return out;
}

}  // namespace

at::Tensor nms(const at::Tensor &boxes, const at::Tensor &scores, double iou_threshold) {
    IPEX_CHECK_INPUT(boxes.dim() == 2 && boxes.size(1) == 4, kOp, ": boxes must be [N, 4] (x1, y1, x2, y2), got ",
                     boxes.sizes());
    IPEX_CHECK_INPUT(scores.dim() == 1 && scores.size(0) == boxes.size(0), kOp, ": scores must be [N] with N = ",
                     boxes.size(0), " boxes, got ", scores.sizes());
    IPEX_CHECK_INPUT(boxes.is_floating_point() && scores.is_floating_point(), kOp,
                     ": boxes and scores must be floating tensors, got ", boxes.scalar_type(), " and ",
                     scores.scalar_type());
    if (boxes.size(0) == 0) return at::empty({0}, boxes.options().dtype(at::kLong));
    // torchvision's order: descending scores, ties in index order (a stable sort).
    const at::Tensor order = std::get<1>(scores.sort(/*stable=*/true, 0, /*descending=*/true)).contiguous();
    if (boxes.scalar_type() == at::kDouble) return run<double>(boxes, order, iou_threshold);
    return run<float>(boxes, order, iou_threshold);
}

}  // namespace ipex::ops::detection
