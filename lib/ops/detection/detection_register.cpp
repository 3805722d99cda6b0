// The detection ops as ipex:: ops, and under torchvision::'s own names (its schemas) when no
// library defined them before this one loaded: a process that loaded torchvision's library
// first keeps torchvision's kernels, and loading this library there changes nothing. Loading
// torchvision's library after this one fails on its duplicate definitions, so a Python program
// that uses both imports torchvision first.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>

#include "ops/detection/detection_ops.h"
#include "ops/op_errors.h"

namespace ipex::ops::detection {
namespace {

at::Tensor roi_align_keep_layout(const at::Tensor &input, const at::Tensor &rois, double spatial_scale,
                                 int64_t pooled_h, int64_t pooled_w, int64_t sampling_ratio, bool aligned) {
    return roi_align(input, rois, spatial_scale, pooled_h, pooled_w, sampling_ratio, aligned, /*keep_layout=*/true);
}

at::Tensor roi_align_contiguous(const at::Tensor &input, const at::Tensor &rois, double spatial_scale,
                                int64_t pooled_h, int64_t pooled_w, int64_t sampling_ratio, bool aligned) {
    return roi_align(input, rois, spatial_scale, pooled_h, pooled_w, sampling_ratio, aligned, /*keep_layout=*/false);
}

// torchvision's schemas (0.14 and later), without the namespace.
constexpr const char *kRoiAlign = "roi_align(Tensor input, Tensor rois, float spatial_scale, int pooled_height, "
                                  "int pooled_width, int sampling_ratio, bool aligned) -> Tensor";
constexpr const char *kNms = "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor";
constexpr const char *kPsRoiAlign = "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, int pooled_height, "
                                    "int pooled_width, int sampling_ratio) -> (Tensor, Tensor)";
constexpr const char *kRoiPool = "roi_pool(Tensor input, Tensor rois, float spatial_scale, int pooled_height, "
                                 "int pooled_width) -> (Tensor, Tensor)";

bool defined(const char *name) {
    return c10::Dispatcher::singleton().findSchema({std::string("torchvision::") + name, ""}).has_value();
}

// The torchvision:: registrations this library made, held for the life of the process.
struct TorchvisionNames {
    std::unique_ptr<torch::Library> library;
    bool registered = false;

    TorchvisionNames() {
        if (defined("roi_align") || defined("nms") || defined("ps_roi_align") || defined("roi_pool")) return;
        library = std::make_unique<torch::Library>(torch::Library::FRAGMENT, "torchvision", c10::nullopt, __FILE__,
                                                   __LINE__);
        library->def(kRoiAlign, IPEX_GUARDED(roi_align_contiguous));
        library->def(kNms, IPEX_GUARDED(nms));
        library->def(kPsRoiAlign, IPEX_GUARDED(ps_roi_align));
        library->def(kRoiPool, IPEX_GUARDED(roi_pool));
        registered = true;
    }
};

const TorchvisionNames &torchvision_names() {
    static const TorchvisionNames names;
    return names;
}

// Registers at load time, after the ipex fragment below (same file, so in order).
struct RegisterAtLoad {
    RegisterAtLoad() { torchvision_names(); }
};

}  // namespace

bool torchvision_names_registered() { return torchvision_names().registered; }

}  // namespace ipex::ops::detection

TORCH_LIBRARY_FRAGMENT(ipex, m) {
    using namespace ipex::ops::detection;
    // ipex::roi_align returns the input's memory format (channels-last in, channels-last out).
    m.def(kRoiAlign, IPEX_GUARDED(roi_align_keep_layout));
    m.def(kNms, IPEX_GUARDED(nms));
    m.def(kPsRoiAlign, IPEX_GUARDED(ps_roi_align));
    m.def(kRoiPool, IPEX_GUARDED(roi_pool));
}

namespace {
const ipex::ops::detection::RegisterAtLoad register_at_load;
}  // namespace
