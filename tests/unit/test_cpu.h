// Test helper: skips a test whose subject this CPU cannot run, with the reason. oneDNN 2.6 has
// bf16 and bf32 (bf16 math for fp32 data) convolutions, linears and RNNs only on AVX-512 CPUs
// (avx512_core and up); on an AVX2 CPU the prepacked ops refuse those dtypes and optimize keeps
// such layers as aten ops (tests/e2e/test_no_avx512.py covers that side).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>

#include "ops/ops.h"

namespace ipex::testing {

// Why oneDNN on this CPU has no convolution/linear of `dtype`, or "" when it has one.
inline std::string onednn_lacks(const std::string &dtype) {
    if (dtype != "bf16" && dtype != "bf32" && dtype != "fp16") return "";
    static std::mutex mutex;
    static std::map<std::string, std::string> known;
    const std::lock_guard<std::mutex> lock(mutex);
    const auto it = known.find(dtype);
    if (it != known.end()) return it->second;
    std::string why;
    const std::string lacks = ops::dtype_supported(dtype, &why) ? ""
                              : "oneDNN has no " + dtype + " convolution/linear on this CPU (" +
                                    why.substr(0, why.find('\n')) + ")";
    known[dtype] = lacks;
    return lacks;
}

// For a loop over dtypes: whether oneDNN runs `dtype` here; when not, the test records why
// (property not_run_<dtype>) and the loop leaves that dtype out.
inline bool onednn_runs(const std::string &dtype) {
    const std::string lacks = onednn_lacks(dtype);
    if (!lacks.empty()) ::testing::Test::RecordProperty("not_run_" + dtype, lacks);
    return lacks.empty();
}

}  // namespace ipex::testing

// In a test body or SetUp: skip when oneDNN cannot run `dtype` here.
#define IPEX_SKIP_WITHOUT_ONEDNN_DTYPE(dtype)                                                  \
    do {                                                                                       \
        const std::string ipex_lacks_ = ::ipex::testing::onednn_lacks(dtype);                  \
        if (!ipex_lacks_.empty()) GTEST_SKIP() << ipex_lacks_;                                 \
    } while (0)
