// `ipex-tool info`: the CPU, its features and AMX permission, oneDNN's ISA, versions, threads and
// topology; with --limits the machine's measured peaks and read bandwidth.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "bench/machine_limits.h"

namespace ipex::commands {

struct InfoRequest {
    bool limits = false;         // measure the machine's limits (about 1.5 s)
    std::optional<int> threads;  // ... on this many threads (unset: default_threads())
};

struct InfoReport {
    nlohmann::json info;  // core/system_info.h's info_json(), with "limits" when measured
    std::optional<bench::MachineLimits> limits;

    nlohmann::json to_json() const { return info; }
    std::string text() const;
};

InfoReport run_info(const InfoRequest &request);

}  // namespace ipex::commands
