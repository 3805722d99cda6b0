// Checks of the hosts of a multi-node run before anything starts: what each name resolves
// to, whether that is this machine, and whether a remote host answers on TCP port 22.
//
// Bounds (check_host_list): each distinct host is checked once, by a pool of at most
// `threads` threads at a time, under ONE deadline for the whole check; a TCP probe waits at
// most `connect_timeout_ms` (less when the deadline is nearer); after `max_failures` hosts
// failed no new check starts. getaddrinfo cannot be cancelled, so a check still running
// when the answer is known (deadline, failures) is abandoned: its thread shares the state
// it writes to (std::shared_ptr) and ends on its own, and the caller never waits for it.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace ipex::launch {

// Addresses of this machine's interfaces (getifaddrs), IPv4 and IPv6, as text.
std::vector<std::string> local_addresses();

// Numeric addresses `host` resolves to (getaddrinfo, one call); empty when it does not resolve.
std::vector<std::string> resolve_host(const std::string &host);

// Whether numeric `address` is loopback (127.0.0.0/8, ::1) or one of `mine`.
bool is_local_address(const std::string &address, const std::vector<std::string> &mine);

// Opens a TCP connection to `port` of the first of `addresses` (numeric) and waits at most
// `timeout_ms`. "" when the host answered (connected, or refused: a host that refuses is
// up), else why not ("No route to host", "no answer within 3000 ms").
std::string probe_address(const std::vector<std::string> &addresses, int port, int timeout_ms);

// Default port of the probe: ssh, which Open MPI and MPICH start remote agents with.
constexpr int kProbePort = 22;

struct HostCheckLimits {
    int threads = 32;               // checks running at once
    int deadline_ms = 10000;        // the whole check
    int connect_timeout_ms = 3000;  // one host's TCP probe
    int max_failures = 3;           // no check starts after this many hosts failed
    int port = kProbePort;
};

struct HostQuery {
    std::string host;
    bool probe = false;  // a host that is not this machine must answer on the port
};

enum class HostState {
    not_checked,  // never started: the failures or the deadline came first
    unfinished,   // started, no result by the deadline (abandoned)
    unresolved,   // the name does not resolve
    unreachable,  // resolved, not this machine, no answer on the port
    local,        // resolves to this machine
    remote,       // resolves elsewhere (and answered, when probed)
};

struct HostStatus {
    std::string host;
    HostState state = HostState::not_checked;
    std::vector<std::string> addresses;  // as resolved
    std::string error;                   // unreachable: why

    bool failed() const {
        return state == HostState::unfinished || state == HostState::unresolved || state == HostState::unreachable;
    }
};

// Both may run after check_host_list returned (abandoned checks), on any thread: they
// must own what they use.
using HostResolver = std::function<std::vector<std::string>(const std::string &host)>;
using HostProber = std::function<std::string(const std::vector<std::string> &addresses, int port, int timeout_ms)>;

// One status per query, in query order (a host listed twice is checked once).
std::vector<HostStatus> check_host_list(const std::vector<HostQuery> &queries, const HostCheckLimits &limits,
                                        HostResolver resolve = resolve_host, HostProber probe = probe_address);

}  // namespace ipex::launch
