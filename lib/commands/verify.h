// `ipex-tool verify A B`: two models on the same inputs, their outputs compared with
// tolerances that follow the lower-precision side.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/compare.h"

namespace ipex::commands {

struct VerifyRequest {
    std::string a, b;                 // reference, candidate
    std::vector<std::string> inputs;  // SPECs; empty: B's (else A's) recorded --sample-input
    uint64_t seed = 0;
    std::optional<double> min_cosine, atol, rtol;  // unset: the dtype's defaults
};

struct VerifyReport {
    std::string a, b;
    std::string dtype;  // the lower-precision side's
    model::Tolerance tolerance;
    std::string note;   // what else sets the expected error (uint8 embedding tables), or empty
    std::vector<model::OutputDiff> diffs;

    nlohmann::json to_json() const;
    std::string text() const;
    bool ok() const;
    // Exit 1 when an output is out of tolerance.
    void check() const;
};

VerifyReport run_verify(const VerifyRequest &request);

}  // namespace ipex::commands
