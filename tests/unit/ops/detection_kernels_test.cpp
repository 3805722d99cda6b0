// The detection ops' kernels: RoIAlign against a naive fp64 reference written from the
// definition, its portable, AVX2 and AVX-512 channels-last builds against each other (to the
// bit), NMS's AVX-512 loop against the portable one, and the input errors. torchvision's own
// kernels are the reference of e2e.detection.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "base/isa.h"
#include "ops/detection/detection_ops.h"
#include "ops/detection/nms_kernel.h"
#include "ops/detection/roi_align_kernel.h"

namespace ipex::ops::detection {
namespace {

// RoIAlign of one box, bin and channel in fp64, from the definition (roi_align_kernel.h).
double naive_bin(const at::Tensor &x, const double *roi, double scale, int64_t ph_n, int64_t pw_n, int64_t sr,
                 bool aligned, int64_t c, int64_t ph, int64_t pw) {
    const int64_t h = x.size(2), w = x.size(3), n = static_cast<int64_t>(roi[0]);
    const double off = aligned ? 0.5 : 0.0;
    const double x1 = roi[1] * scale - off, y1 = roi[2] * scale - off;
    double rw = roi[3] * scale - off - x1, rh = roi[4] * scale - off - y1;
    if (!aligned) rw = std::max(rw, 1.0), rh = std::max(rh, 1.0);
    const double bh = rh / ph_n, bw = rw / pw_n;
    const int64_t gh = sr > 0 ? sr : static_cast<int64_t>(std::ceil(rh / ph_n));
    const int64_t gw = sr > 0 ? sr : static_cast<int64_t>(std::ceil(rw / pw_n));
    auto at = [&](int64_t yy, int64_t xx) { return x[n][c][yy][xx].item<double>(); };
    double sum = 0;
    for (int64_t iy = 0; iy < gh; ++iy) {
        for (int64_t ix = 0; ix < gw; ++ix) {
            double y = y1 + ph * bh + (iy + 0.5) * bh / gh, xx = x1 + pw * bw + (ix + 0.5) * bw / gw;
            if (y < -1 || y > h || xx < -1 || xx > w) continue;
            y = std::min(std::max(y, 0.0), static_cast<double>(h - 1));
            xx = std::min(std::max(xx, 0.0), static_cast<double>(w - 1));
            const int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(xx);
            const int64_t y_1 = std::min(y0 + 1, h - 1), x_1 = std::min(x0 + 1, w - 1);
            const double ly = y - y0, lx = xx - x0;
            sum += (1 - ly) * (1 - lx) * at(y0, x0) + (1 - ly) * lx * at(y0, x_1) + ly * (1 - lx) * at(y_1, x0) +
                   ly * lx * at(y_1, x_1);
        }
    }
    return sum / std::max<int64_t>(gh * gw, 1);
}

at::Tensor random_rois(int64_t k, int64_t images, int64_t h, int64_t w) {
    at::Tensor b = at::rand({k, 4}) * at::tensor({w, h, w, h}).to(at::kFloat) * 1.4 - 3;
    b.slice(1, 2, 4).copy_(b.slice(1, 0, 2) + at::rand({k, 2}) * 20);
    return at::cat({at::randint(0, images, {k, 1}).to(at::kFloat), b}, 1);
}

class Detection : public ::testing::Test {
protected:
    void SetUp() override { at::manual_seed(0); }
};

TEST_F(Detection, RoiAlignMatchesTheDefinition) {
    const at::Tensor x = at::randn({2, 19, 13, 17});
    const at::Tensor rois = random_rois(12, 2, 13, 17);
    const at::Tensor rois64 = rois.to(at::kDouble).contiguous();
    for (int64_t sr : {0, 2}) {
        for (bool aligned : {false, true}) {
            for (bool channels_last : {false, true}) {
                const at::Tensor in = channels_last ? x.contiguous(at::MemoryFormat::ChannelsLast) : x;
                const at::Tensor got = roi_align(in, rois, 0.5, 3, 4, sr, aligned, true);
                double worst = 0;
                for (int64_t k = 0; k < rois.size(0); ++k)
                    for (int64_t c = 0; c < x.size(1); ++c)
                        for (int64_t ph = 0; ph < 3; ++ph)
                            for (int64_t pw = 0; pw < 4; ++pw) {
                                const double want = naive_bin(x, rois64.data_ptr<double>() + 5 * k, 0.5, 3, 4, sr,
                                                              aligned, c, ph, pw);
                                worst = std::max(worst, std::abs(got[k][c][ph][pw].item<double>() - want) /
                                                            (1 + std::abs(want)));
                            }
                EXPECT_LE(worst, 1e-5) << "sampling_ratio " << sr << " aligned " << aligned << " channels_last "
                                       << channels_last;
            }
        }
    }
}

// One box's problem on a channels-last image, for calling the kernel builds directly.
struct KernelCase {
    at::Tensor src, dst;
    std::vector<Sample<float>> samples;
    ChannelsLastProblem p;
};

KernelCase kernel_case(bool bf16, int64_t channels) {
    KernelCase kc;
    const at::Tensor x = at::randn({1, channels, 11, 9}).contiguous(at::MemoryFormat::ChannelsLast);
    kc.src = bf16 ? x.to(at::kBFloat16) : x;
    const float box[4] = {-2.f, 1.5f, 7.25f, 12.f};
    BoxGrid<float> g;
    EXPECT_TRUE(box_grid(box, 1.f, 5, 4, 0, true, &g));
    box_samples(g, 11, 9, 5, 4, &kc.samples);
    kc.dst = at::zeros({20 * channels}, kc.src.options());
    kc.p.bf16 = bf16;
    kc.p.src = kc.src.data_ptr();
    kc.p.channels = channels;
    kc.p.samples = kc.samples.data();
    kc.p.bins = 20;
    kc.p.samples_per_bin = static_cast<int64_t>(kc.samples.size()) / 20;
    kc.p.count = g.count;
    kc.p.c_begin = 3;
    kc.p.c_end = channels;
    kc.p.dst = kc.dst.data_ptr();
    kc.p.dst_bin_stride = channels;
    return kc;
}

void expect_same_as_portable(void (*kernel)(const ChannelsLastProblem &)) {
    for (bool bf16 : {false, true}) {
        for (int64_t channels : {5, 64, 83}) {
            for (int64_t channel_stride : {int64_t{1}, int64_t{20}}) {
                KernelCase a = kernel_case(bf16, channels), b = a;
                b.dst = at::zeros_like(a.dst);
                b.p.dst = b.dst.data_ptr();
                a.p.dst_channel_stride = b.p.dst_channel_stride = channel_stride;
                a.p.dst_bin_stride = b.p.dst_bin_stride = channel_stride == 1 ? channels : 1;
                run_channels_last(a.p);
                kernel(b.p);
                EXPECT_TRUE(at::equal(a.dst, b.dst)) << "bf16 " << bf16 << " channels " << channels;
            }
        }
    }
}

TEST_F(Detection, RoiAlignAvx2BuildGivesThePortableResults) {
    if (!isa::avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 with FMA";
    expect_same_as_portable(avx2::run_channels_last);
}

TEST_F(Detection, RoiAlignAvx512BuildGivesThePortableResults) {
    if (!avx512::available(true)) GTEST_SKIP() << "this CPU has no AVX-512 with AVX512-BF16";
    expect_same_as_portable(avx512::run_channels_last);
}

TEST_F(Detection, NmsAvx512LoopKeepsThePortableSet) {
    if (!avx512::nms_available()) GTEST_SKIP() << "this CPU has no AVX-512";
    at::Tensor b = at::rand({300, 4}) * 50;
    b.slice(1, 2, 4).add_(b.slice(1, 0, 2));
    const at::Tensor cols = b.t().contiguous();
    const at::Tensor area = (cols[2] - cols[0]) * (cols[3] - cols[1]);
    for (double t : {0.0, 0.3, 0.7, 1.0}) {
        std::vector<uint8_t> sa(300, 0), sb(300, 0);
        std::vector<int64_t> ka(300), kb(300);
        NmsProblem<float> p;
        p.x1 = cols[0].data_ptr<float>(), p.y1 = cols[1].data_ptr<float>();
        p.x2 = cols[2].data_ptr<float>(), p.y2 = cols[3].data_ptr<float>();
        p.area = area.data_ptr<float>(), p.n = 300, p.threshold = fp32_threshold(t);
        p.suppressed = sa.data();
        const int64_t na = suppress(p, ka.data());
        p.suppressed = sb.data();
        const int64_t nb = avx512::suppress(p, kb.data());
        ASSERT_EQ(na, nb) << t;
        EXPECT_TRUE(std::equal(ka.begin(), ka.begin() + na, kb.begin())) << t;
    }
}

TEST_F(Detection, Fp32ThresholdComparesAsTheDoubleDoes) {
    for (double t : {0.0, 0.5, 0.7, 0.3, 1.0 / 3, 1.0}) {
        const float bound = fp32_threshold(t);
        float ovr = bound;
        for (int i = 0; i < 4; ++i) ovr = std::nextafter(ovr, -1.f);
        for (int i = 0; i < 8; ++i, ovr = std::nextafter(ovr, 2.f))
            EXPECT_EQ(ovr > bound, static_cast<double>(ovr) > t) << t << " " << ovr;
    }
}

void expect_input_error(const std::function<void()> &call, const std::string &mention) {
    try {
        call();
        ADD_FAILURE() << "no error; expected one naming " << mention;
    } catch (const c10::Error &e) {
        const std::string what = e.what_without_backtrace();
        EXPECT_NE(what.find(mention), std::string::npos) << what;
        EXPECT_NE(what.find("[ipex:input]"), std::string::npos) << what;
    }
}

TEST_F(Detection, RefusesMalformedArguments) {
    const at::Tensor x = at::randn({2, 4, 8, 8});
    const at::Tensor rois = at::tensor(std::vector<float>{0, 1, 1, 5, 5}).reshape({1, 5});
    expect_input_error([&] { roi_align(x, rois, 1.0, 2, 2, -1, true, false); }, "sampling_ratio");
    expect_input_error([&] { roi_align(x, rois, 1.0, 2, 2, 1 << 20, true, false); }, "sampling_ratio");
    expect_input_error([&] { roi_align(x, rois.slice(1, 1), 1.0, 2, 2, 0, true, false); }, "[K, 5]");
    expect_input_error([&] { roi_align(x[0], rois, 1.0, 2, 2, 0, true, false); }, "[N, C, H, W]");
    expect_input_error([&] { roi_align(x, rois * at::tensor(std::vector<float>{1, 1, 1, NAN, 1}), 1.0, 2, 2, 0, true, false); },
                       "non-finite");
    expect_input_error([&] { roi_align(x, rois + at::tensor(std::vector<float>{2, 0, 0, 0, 0}), 1.0, 2, 2, 0, true, false); },
                       "batch index");
    expect_input_error([&] { roi_align(x, rois * at::tensor(std::vector<float>{1, 1, 1, 1e7, 1e7}), 1.0, 2, 2, 0, true, false); },
                       "sampling points");
    expect_input_error([&] { roi_pool(x, rois, 1.0, -1, 2); }, "pooled size");
    expect_input_error([&] { ps_roi_align(x, rois, 1.0, 3, 3, 0); }, "multiple of");
    expect_input_error([&] { nms(at::rand({3, 5}), at::rand({3}), 0.5); }, "[N, 4]");
    expect_input_error([&] { nms(at::rand({3, 4}), at::rand({4}), 0.5); }, "scores");
}

}  // namespace
}  // namespace ipex::ops::detection
