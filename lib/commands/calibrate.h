// `ipex-tool calibrate MODEL --data SPEC --out QCONFIG.json`: observers on the model's
// quantizable ops over the calibration batches, written as a qconfig; or, with an IPEX
// qconfig summary in place of the batches, that summary converted for the model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace ipex::commands {

struct CalibrateRequest {
    std::string model, data, out;
    std::string ipex_summary;             // IPEX's save_qconf_summary file, converted in place of --data
    std::string recipe;                   // "": the built-in recipes/int8-default.json
    std::string observer;                 // "": the recipe's activation observer
    std::optional<double> smooth_quant;   // SmoothQuant alpha for linear layers (unset: the recipe's)
    int64_t max_batches = 0;              // 0: all
    std::function<void(size_t, size_t)> progress;  // (done, total) after each batch; may be empty
};

struct CalibrateReport {
    std::string out, observer;
    std::string ipex_summary;  // the summary converted, when no batches were observed
    size_t ops = 0, batches = 0;

    // "wrote OUT (N quantizable ops, B batches, observer O)": the line calibrate logs.
    std::string text() const;
};

// Exit 2 unless exactly one of --data and --ipex-summary is given.
CalibrateReport run_calibrate(const CalibrateRequest &request);

}  // namespace ipex::commands
