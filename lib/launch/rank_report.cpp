#include "launch/rank_report.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/errors.h"
#include "base/log.h"

namespace ipex::launch {
namespace {

template <typename T>
T value_or(const nlohmann::json &j, const char *key, T fallback) {
    auto it = j.find(key);
    if (it == j.end()) return fallback;
    try {
        return it->get<T>();
    } catch (const nlohmann::json::exception &) {
        return fallback;
    }
}

std::string random_hex(size_t digits) {
    std::string out;
    unsigned char bytes[32] = {0};
    const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, bytes, sizeof(bytes)) != static_cast<ssize_t>(sizeof(bytes)))
        throw_internal("cannot read /dev/urandom for the rank report token");
    close(fd);
    const char *hex = "0123456789abcdef";
    for (size_t i = 0; i < digits / 2 && i < sizeof(bytes); ++i) {
        out += hex[bytes[i] >> 4];
        out += hex[bytes[i] & 15];
    }
    return out;
}

}  // namespace

std::string encode_frame(FrameKind kind, const std::string &payload) {
    std::string out(kFrameHeader, '\0');
    out[0] = static_cast<char>(kind);
    const uint32_t n = static_cast<uint32_t>(payload.size());
    for (int i = 0; i < 4; ++i) out[static_cast<size_t>(1 + i)] = static_cast<char>((n >> (24 - 8 * i)) & 0xff);
    return out + payload;
}

std::optional<Frame> take_frame(std::string &buf) {
    if (buf.size() < kFrameHeader) return std::nullopt;
    const char kind = buf[0];
    if (kind != 'H' && kind != 'O' && kind != 'E' && kind != 'S' && kind != 'K')
        throw_bad_input("rank report: unknown frame kind " + std::to_string(static_cast<unsigned char>(kind)));
    uint32_t n = 0;
    for (int i = 0; i < 4; ++i) n = (n << 8) | static_cast<unsigned char>(buf[static_cast<size_t>(1 + i)]);
    if (n > kMaxFramePayload) throw_bad_input("rank report: frame of " + std::to_string(n) + " bytes");
    if (buf.size() < kFrameHeader + n) return std::nullopt;
    Frame f{static_cast<FrameKind>(kind), buf.substr(kFrameHeader, n)};
    buf.erase(0, kFrameHeader + n);
    return f;
}

std::string signal_frame(int sig) { return encode_frame(FrameKind::signal, std::to_string(sig)); }

int requested_signal(const Frame &f) {
    if (f.kind != FrameKind::signal) return 0;
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGKILL})
        if (f.payload == std::to_string(sig)) return sig;
    return 0;
}

nlohmann::json outcome_to_json(const InstanceOutcome &o) {
    return {{"index", o.index},
            {"pid", static_cast<long>(o.pid)},
            {"start_error", o.start_error},
            {"exit_code", o.exit_code},
            {"signal", o.signal},
            {"timed_out", o.timed_out},
            {"wall_seconds", o.wall_seconds},
            {"peak_rss_kib", o.peak_rss_kib},
            {"membind_errno", o.membind_errno}};
}

InstanceOutcome outcome_from_json(const nlohmann::json &j) {
    InstanceOutcome o;
    if (!j.is_object()) return o;
    o.index = value_or(j, "index", 0);
    o.pid = static_cast<pid_t>(value_or(j, "pid", -1L));
    o.start_error = value_or(j, "start_error", std::string());
    o.exit_code = value_or(j, "exit_code", -1);
    o.signal = value_or(j, "signal", 0);
    o.timed_out = value_or(j, "timed_out", false);
    o.wall_seconds = value_or(j, "wall_seconds", 0.0);
    o.peak_rss_kib = value_or(j, "peak_rss_kib", 0L);
    o.membind_errno = value_or(j, "membind_errno", 0);
    return o;
}

nlohmann::json placement_to_json(const InstancePlacement &p) {
    return {{"cpus", p.cpus}, {"cores", p.cores}, {"numa_nodes", p.numa_nodes}, {"packages", p.packages}};
}

InstancePlacement placement_from_json(const nlohmann::json &j) {
    InstancePlacement p;
    if (!j.is_object()) return p;
    p.cpus = value_or(j, "cpus", std::vector<int>());
    p.cores = value_or(j, "cores", std::vector<int>());
    p.numa_nodes = value_or(j, "numa_nodes", std::vector<int>());
    p.packages = value_or(j, "packages", std::vector<int>());
    return p;
}

ReportListener::ReportListener() : token_(random_hex(32)) {
    fd_ = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ >= 0) {
        int off = 0;
        setsockopt(fd_, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
        sockaddr_in6 addr{};
        addr.sin6_family = AF_INET6;
        addr.sin6_addr = in6addr_any;
        if (bind(fd_, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0) {
            close(fd_);
            fd_ = -1;
        }
    }
    if (fd_ < 0) {  // no IPv6 here: IPv4 alone
        fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_ANY);
        if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0)
            throw_internal(std::string("cannot open the rank report socket: ") + std::strerror(errno));
    }
    if (listen(fd_, 512) != 0) throw_internal(std::string("listen: ") + std::strerror(errno));
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    getsockname(fd_, reinterpret_cast<sockaddr *>(&bound), &len);
    port_ = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6 *>(&bound)->sin6_port)
                                        : ntohs(reinterpret_cast<sockaddr_in *>(&bound)->sin_port);
    fcntl(fd_, F_SETFL, O_NONBLOCK);
}

ReportListener::~ReportListener() {
    if (fd_ >= 0) close(fd_);
}

std::string report_token(const std::string &report_to) {
    const size_t colon = report_to.rfind(':');
    return colon == std::string::npos ? "" : report_to.substr(colon + 1);
}

int connect_report(const std::string &report_to, int timeout_ms, std::string &error) {
    const size_t c2 = report_to.rfind(':');
    const size_t c1 = c2 == std::string::npos || c2 == 0 ? std::string::npos : report_to.rfind(':', c2 - 1);
    if (c1 == std::string::npos) {
        error = "--report '" + report_to + "' is not ADDR:PORT:TOKEN";
        return -1;
    }
    std::string host = report_to.substr(0, c1);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    const std::string port = report_to.substr(c1 + 1, c2 - c1 - 1);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *res = nullptr;
    if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0 || !res) {
        error = "cannot resolve " + host;
        return -1;
    }
    int fd = -1;
    error = "no address of " + host + " answered";
    for (addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) continue;
        int rc = connect(fd, a->ai_addr, a->ai_addrlen);
        if (rc != 0 && errno == EINPROGRESS) {
            pollfd p{fd, POLLOUT, 0};
            int err = ETIMEDOUT;
            if (poll(&p, 1, timeout_ms) == 1) {
                socklen_t len = sizeof(err);
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
            }
            rc = err == 0 ? 0 : -1;
            errno = err;
        }
        if (rc != 0) {
            error = "connect to " + host + ":" + port + ": " + std::strerror(errno);
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

}  // namespace ipex::launch
