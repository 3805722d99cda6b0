// Calibration: runs the user's batches through the prepared model with observers on the
// inputs and outputs of every quantizable op (and the operands of fused adds) and writes
// what they saw as a qconfig.
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "quant/qconfig.h"
#include "quant/recipe.h"

namespace ipex::quant {

// Upper bound on calibration batches a directory may hold.
constexpr size_t kMaxCalibrationFiles = 100000;

// The batch files of a --data SPEC: a .pt/.npy file, or a directory of them in sorted name
// order (other files ignored). Exit 3 when missing, empty or holding no such file.
std::vector<std::string> list_batches(const std::string &spec);

struct CalibrateOptions {
    Recipe recipe = default_recipe();
    int64_t max_batches = 0;  // 0: all
    std::string source;       // model path, recorded in the qconfig
    // Called after each batch with (done, total) (progress bar); may be empty.
    std::function<void(size_t, size_t)> progress;
};

QConfig calibrate(const torch::jit::Module &model, const std::vector<std::string> &batch_files,
                  const CalibrateOptions &options);

}  // namespace ipex::quant
