// Checks of the hosts of a multi-node run before anything starts: is the master address
// (and the first host, where rank 0 runs) this machine, and does every other host answer.
#pragma once

#include <string>
#include <vector>

namespace ipex::launch {

// Addresses of this machine's interfaces (getifaddrs), IPv4 and IPv6, as text.
std::vector<std::string> local_addresses();

// Numeric addresses `host` resolves to (getaddrinfo); empty when it does not resolve.
std::vector<std::string> resolve_host(const std::string &host);

// Whether `host` resolves to an address of this machine (any 127.0.0.0/8 or ::1 counts).
bool is_local_host(const std::string &host);

// Default port of the probe: ssh, which Open MPI and MPICH start remote agents with.
constexpr int kProbePort = 22;

struct HostProbe {
    std::string host;
    bool resolved = false;
    bool reachable = false;  // connected, or refused (a host that refuses is up)
    std::string error;       // why not, as strerror text ("No route to host", "timed out")
};

// Opens a TCP connection to port `port` of every host at once and waits at most
// `timeout_ms` for the answers.
std::vector<HostProbe> probe_hosts(const std::vector<std::string> &hosts, int port, int timeout_ms);

}  // namespace ipex::launch
