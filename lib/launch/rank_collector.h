// The launcher's end of the rank report channel (rank_report.h): a thread that accepts
// one connection per rank, writes each rank's output to its log file and, line by line
// with a "[host:rank] " prefix, to the console, collects oneDNN verbose statistics per rank
// and keeps each rank's placement and exit status. It runs while mpirun runs, and passes
// the launcher's signals to the ranks over the same connections.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "launch/partition.h"
#include "launch/rank_report.h"
#include "launch/runner.h"

namespace ipex::launch {

struct RankResult {
    bool started = false;   // said hello
    bool finished = false;  // sent its exit status
    std::string hostname;   // as the host calls itself
    InstancePlacement placement;  // as planned on its host
    InstanceOutcome outcome;
};

struct CollectorSettings {
    std::vector<std::string> labels;     // per rank: "host:rank"
    std::vector<std::string> log_paths;  // per rank, "" for none
    bool stdout_to_stderr = false;
    bool parse_verbose = false;
    bool hide_verbose_lines = false;
};

class RankCollector {
public:
    // Starts the thread. Throws Error(usage) when a log file cannot be created.
    RankCollector(const ReportListener &listener, CollectorSettings settings);
    ~RankCollector();
    RankCollector(const RankCollector &) = delete;
    RankCollector &operator=(const RankCollector &) = delete;

    // Asks every rank connected and still running to pass `sig` on to its program (a K
    // frame, rank_report.h); callable from any thread while the collector runs. Returns
    // whether that covers every rank: each one is either asked now or has finished. A rank
    // that has not said hello yet, or whose connection is gone, is not covered.
    bool signal_ranks(int sig);

    // Waits up to `grace_seconds` for the open connections to end, stops the thread and
    // returns the result of every rank.
    std::vector<RankResult> finish(double grace_seconds);

private:
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace ipex::launch
