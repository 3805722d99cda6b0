#include "launch/host_check.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace ipex::launch {
namespace {

std::string address_text(const sockaddr *sa) {
    char buf[INET6_ADDRSTRLEN] = {0};
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in *>(sa)->sin_addr, buf, sizeof(buf));
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6 *>(sa)->sin6_addr, buf, sizeof(buf));
    return buf;
}

struct AddrInfo {
    addrinfo *list = nullptr;
    ~AddrInfo() {
        if (list) freeaddrinfo(list);
    }
};

}  // namespace

std::vector<std::string> local_addresses() {
    std::vector<std::string> out;
    ifaddrs *ifs = nullptr;
    if (getifaddrs(&ifs) != 0) return out;
    for (ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
        const std::string text = address_text(i->ifa_addr);
        if (!text.empty() && std::find(out.begin(), out.end(), text) == out.end()) out.push_back(text);
    }
    freeifaddrs(ifs);
    return out;
}

std::vector<std::string> resolve_host(const std::string &host) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    AddrInfo res;
    std::vector<std::string> out;
    if (getaddrinfo(host.c_str(), nullptr, &hints, &res.list) != 0) return out;
    for (addrinfo *a = res.list; a; a = a->ai_next) {
        const std::string text = address_text(a->ai_addr);
        if (!text.empty() && std::find(out.begin(), out.end(), text) == out.end()) out.push_back(text);
    }
    return out;
}

bool is_local_host(const std::string &host) {
    const auto mine = local_addresses();
    for (const auto &addr : resolve_host(host)) {
        if (addr.rfind("127.", 0) == 0 || addr == "::1") return true;
        if (std::find(mine.begin(), mine.end(), addr) != mine.end()) return true;
    }
    return false;
}

std::vector<HostProbe> probe_hosts(const std::vector<std::string> &hosts, int port, int timeout_ms) {
    std::vector<HostProbe> out(hosts.size());
    std::vector<int> fds(hosts.size(), -1);
    std::vector<pollfd> pfds;
    std::vector<size_t> owner;
    for (size_t i = 0; i < hosts.size(); ++i) {
        out[i].host = hosts[i];
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        AddrInfo res;
        const std::string service = std::to_string(port);
        if (getaddrinfo(hosts[i].c_str(), service.c_str(), &hints, &res.list) != 0 || !res.list) {
            out[i].error = "the name does not resolve";
            continue;
        }
        out[i].resolved = true;
        const int fd = socket(res.list->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            out[i].error = std::strerror(errno);
            continue;
        }
        if (connect(fd, res.list->ai_addr, res.list->ai_addrlen) == 0 || errno == ECONNREFUSED) {
            out[i].reachable = true;
            close(fd);
        } else if (errno == EINPROGRESS) {
            fds[i] = fd;
            pfds.push_back({fd, POLLOUT, 0});
            owner.push_back(i);
        } else {
            out[i].error = std::strerror(errno);
            close(fd);
        }
    }
    using Clock = std::chrono::steady_clock;
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    size_t pending = pfds.size();
    while (pending > 0) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) break;
        const int n = poll(pfds.data(), pfds.size(), static_cast<int>(left));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        for (size_t k = 0; k < pfds.size(); ++k) {
            if (pfds[k].fd < 0 || pfds[k].revents == 0) continue;
            const size_t i = owner[k];
            int err = 0;
            socklen_t len = sizeof(err);
            getsockopt(pfds[k].fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err == 0 || err == ECONNREFUSED) out[i].reachable = true;
            else out[i].error = std::strerror(err);
            close(pfds[k].fd);
            fds[i] = -1;
            pfds[k].fd = -1;
            --pending;
        }
    }
    for (size_t i = 0; i < fds.size(); ++i)
        if (fds[i] >= 0) {
            out[i].error = "no answer within " + std::to_string(timeout_ms) + " ms";
            close(fds[i]);
        }
    return out;
}

}  // namespace ipex::launch
