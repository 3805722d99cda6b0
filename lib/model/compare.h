// `ipex-tool verify`: run two models on the same inputs and compare every output.
#pragma once

#include <ATen/core/ivalue.h>
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ipex::model {

struct Tolerance {
    double min_cosine = 0.99999;
    std::optional<double> atol;  // when set (alone or with rtol): |a-b| <= atol + rtol*|a|
    std::optional<double> rtol;
};

// Default tolerance for a candidate computing in `dtype` (fp32, bf16, fp16).
Tolerance default_tolerance(const std::string &dtype);

struct OutputDiff {
    std::string name;          // "0", "1.logits", ... ("" for a single tensor output)
    std::vector<int64_t> shape;
    double max_abs_err = 0.0;
    double max_rel_err = 0.0;  // max |a-b| / max(|a|, 1e-3 * max|a|)
    double cosine = 1.0;
    std::optional<double> argmax_agreement;  // 2-D outputs: rows whose argmax agree
    bool ok = true;
    std::string problem;       // set when shapes/dtypes/structure differ
};

// Flattens tuples, lists and dicts of tensors into (path, tensor) pairs; non-tensor
// leaves are kept as their string form for the structure comparison.
std::vector<std::pair<std::string, c10::IValue>> flatten_outputs(const c10::IValue &value);

// Compares reference `a` against candidate `b`.
std::vector<OutputDiff> compare_outputs(const c10::IValue &a, const c10::IValue &b,
                                        const Tolerance &tol);

nlohmann::json diffs_to_json(const std::vector<OutputDiff> &diffs, const Tolerance &tol,
                             const std::string &dtype);

std::string format_diffs(const std::vector<OutputDiff> &diffs, const Tolerance &tol);

}  // namespace ipex::model
