// The channel from each rank of a multi-node run back to the launcher: one TCP
// connection per rank to a listener the launcher opens for the run (on every address,
// port chosen by the kernel), so output of different ranks never interleaves, whatever
// the MPI process manager does with its own streams. Frames are a kind byte, a 4-byte
// big-endian length and the payload:
//   H hello   {"token", "rank", "pid", "hostname", "cpus", "cores", "numa_nodes", "packages"}
//   O / E     bytes the program wrote to stdout / stderr
//   S status  the InstanceOutcome as JSON (after the program ended, or why it did not start)
// and one frame the other way, launcher to rank:
//   K signal  the decimal number of a signal the rank passes on to its program's process
//             group (SIGINT, SIGTERM, SIGHUP or SIGKILL; others are ignored)
// A connection whose first frame is not a hello with the run's token is dropped.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "launch/partition.h"
#include "launch/runner.h"

namespace ipex::launch {

enum class FrameKind : char { hello = 'H', out = 'O', err = 'E', status = 'S', signal = 'K' };

constexpr size_t kFrameHeader = 5;
constexpr size_t kMaxFramePayload = 1u << 20;

std::string encode_frame(FrameKind kind, const std::string &payload);

struct Frame {
    FrameKind kind;
    std::string payload;
};

// Takes the first whole frame off the front of `buf`. nullopt when more bytes are needed;
// throws Error(bad_input) for an unknown kind or a payload above kMaxFramePayload.
std::optional<Frame> take_frame(std::string &buf);

// The K frame asking a rank to pass `sig` on, and the signal such a frame asks for (0 for
// any other frame or signal).
std::string signal_frame(int sig);
int requested_signal(const Frame &f);

nlohmann::json outcome_to_json(const InstanceOutcome &o);
// Missing or mistyped fields keep their defaults.
InstanceOutcome outcome_from_json(const nlohmann::json &j);
nlohmann::json placement_to_json(const InstancePlacement &p);
InstancePlacement placement_from_json(const nlohmann::json &j);

// A listening TCP socket on every address (IPv6 with IPv4 mapped, or IPv4 alone).
class ReportListener {
public:
    ReportListener();  // throws Error(internal) when no socket can be opened
    ~ReportListener();
    ReportListener(const ReportListener &) = delete;
    ReportListener &operator=(const ReportListener &) = delete;
    int fd() const { return fd_; }
    int port() const { return port_; }
    const std::string &token() const { return token_; }

private:
    int fd_ = -1;
    int port_ = 0;
    std::string token_;  // 32 random hex digits
};

// "ADDR:PORT:TOKEN" -> connected socket, or -1 (errno-style message in `error`).
int connect_report(const std::string &report_to, int timeout_ms, std::string &error);

// The token part of "ADDR:PORT:TOKEN".
std::string report_token(const std::string &report_to);

}  // namespace ipex::launch
