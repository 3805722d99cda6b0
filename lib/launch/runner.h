// Runs prepared instances: fork, bind, exec; streams each instance's stdout/stderr into
// its log file and (prefixed "[i] ") to the console; forwards SIGINT/SIGTERM/SIGHUP to
// every instance's process group, or through a hook (a second signal kills them); passes on
// signals asked for over a control descriptor; enforces an optional
// timeout; reaps each instance with its exit status, wall time and peak RSS.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "launch/binding.h"
#include "base/onednn_verbose.h"

namespace ipex::launch {

// Seconds between SIGTERM and SIGKILL when instances time out (and Open MPI's kill timer when
// mpirun ends a job itself, mpi_command.h).
inline constexpr int kKillGraceSeconds = 10;

struct RunSpec {
    int index = 0;
    std::string executable;         // path for execve
    std::vector<std::string> argv;
    std::vector<std::string> envp;  // NAME=value
    PreparedBinding binding;
    std::string log_path;           // "" for no log file
    std::string label;              // console prefix "[label] "; "" for the index
};

struct RunSettings {
    bool console = true;             // echo instance output to the console
    bool stdout_to_stderr = false;   // keep our stdout for a JSON report
    bool parse_verbose = false;      // collect oneDNN verbose statistics
    bool hide_verbose_lines = false; // keep oneDNN verbose lines out of the console
    double timeout_seconds = 0;      // 0: none
    double kill_grace_seconds = kKillGraceSeconds;  // SIGTERM -> SIGKILL delay after a timeout
    // A second signal kills the instances (SIGKILL). Off for a multi-node rank: mpirun and the
    // launcher's own signal to mpirun's process group both reach it, and escalating is
    // mpirun's call, not the rank's.
    bool escalate_repeated_signals = true;
    // When set, receives each instance's output as read (stream 1 or 2) instead of the
    // console, log file and verbose handling (a multi-node rank sends it to the launcher).
    std::function<void(const RunSpec &spec, int stream, const char *data, size_t size)> on_output;

    // When set, a signal to pass on (one received, --timeout's SIGTERM and SIGKILL) goes
    // through this instead of to the instances' process groups; it returns whether that
    // reached everything the instances run, and the process groups get the signal as well
    // when it did not. The multi-node launcher asks every rank over its report channel:
    // that reaches each rank's program at once on every host, where mpirun would pass a
    // SIGTERM on only after its own kill timer, and SIGKILL one timer later.
    std::function<bool(int sig)> deliver_signal;
    // Who gets a signal passed on, for the message ("the running instances", "the ranks").
    std::string signal_targets = "the running instances";

    // When set (>= 0), polled beside the instances' output; when it is readable,
    // on_control() reads it and returns a signal to pass to the instances' process groups
    // (0: none yet, -1: closed, poll no more). A multi-node rank reads the launcher's K
    // frames this way (rank_report.h). Such a signal is the launcher's, never escalated.
    int control_fd = -1;
    std::function<int()> on_control;
};

struct InstanceOutcome {
    int index = 0;
    pid_t pid = -1;
    std::string start_error;  // set when the program could not be started
    int exit_code = -1;       // valid when signal == 0
    int signal = 0;           // the signal that ended it, 0 if it exited
    bool timed_out = false;
    double wall_seconds = 0;
    long peak_rss_kib = 0;
    int membind_errno = 0;    // the memory policy was refused (affinity still applied)
    VerboseStats verbose;
    VerboseInfo verbose_info;

    bool ok() const { return start_error.empty() && signal == 0 && exit_code == 0; }
    std::string status_text() const;  // "exit 0", "signal 15 (SIGTERM)", "not started"
};

// Throws Error(bad_input) when a log file cannot be created, Error(internal) when fork
// or pipe fail before anything runs.
std::vector<InstanceOutcome> run_instances(const std::vector<RunSpec> &specs,
                                           const RunSettings &settings);

}  // namespace ipex::launch
