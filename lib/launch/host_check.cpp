#include "launch/host_check.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>

namespace ipex::launch {
namespace {

using Clock = std::chrono::steady_clock;

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

class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() {
        if (fd_ >= 0) close(fd_);
    }
    Fd(const Fd &) = delete;
    Fd &operator=(const Fd &) = delete;
    int get() const { return fd_; }

private:
    int fd_;
};

long ms_until(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
}

// Everything a check thread touches. Shared by the caller and every thread, so an
// abandoned thread writes into memory that lives as long as it does.
struct CheckState {
    // Set before the threads start, read-only after.
    std::vector<HostQuery> queries;  // distinct hosts
    std::vector<std::string> mine;   // this machine's addresses
    HostCheckLimits limits;
    Clock::time_point deadline;
    HostResolver resolve;
    HostProber probe;

    // Guarded by `mutex`.
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<HostStatus> results;
    size_t next = 0;
    int failures = 0;
    int threads_alive = 0;
};

HostStatus check_one(const CheckState &s, const HostQuery &q) {
    HostStatus st;
    st.host = q.host;
    st.addresses = s.resolve(q.host);
    if (st.addresses.empty()) {
        st.state = HostState::unresolved;
        return st;
    }
    for (const auto &a : st.addresses)
        if (is_local_address(a, s.mine)) {
            st.state = HostState::local;
            return st;
        }
    st.state = HostState::remote;
    if (!q.probe) return st;
    const long left = ms_until(s.deadline);
    if (left <= 0) {
        st.state = HostState::unfinished;
        return st;
    }
    st.error = s.probe(st.addresses, s.limits.port,
                       static_cast<int>(std::min<long>(left, s.limits.connect_timeout_ms)));
    if (!st.error.empty()) st.state = HostState::unreachable;
    return st;
}

void check_thread(std::shared_ptr<CheckState> s) {
    for (;;) {
        size_t i;
        {
            std::lock_guard<std::mutex> lock(s->mutex);
            const bool stop = s->failures >= s->limits.max_failures || Clock::now() >= s->deadline;
            if (stop || s->next >= s->queries.size()) break;
            i = s->next++;
            s->results[i].state = HostState::unfinished;
        }
        HostStatus st = check_one(*s, s->queries[i]);
        {
            std::lock_guard<std::mutex> lock(s->mutex);
            if (st.failed()) ++s->failures;
            s->results[i] = std::move(st);
        }
        s->changed.notify_all();
    }
    {
        std::lock_guard<std::mutex> lock(s->mutex);
        --s->threads_alive;
    }
    s->changed.notify_all();
}

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

bool is_local_address(const std::string &address, const std::vector<std::string> &mine) {
    if (address.rfind("127.", 0) == 0 || address == "::1" || address.rfind("::ffff:127.", 0) == 0) return true;
    return std::find(mine.begin(), mine.end(), address) != mine.end();
}

std::string probe_address(const std::vector<std::string> &addresses, int port, int timeout_ms) {
    if (addresses.empty()) return "no address";
    sockaddr_storage ss{};
    socklen_t len = 0;
    const std::string &text = addresses.front();
    auto *v4 = reinterpret_cast<sockaddr_in *>(&ss);
    auto *v6 = reinterpret_cast<sockaddr_in6 *>(&ss);
    if (inet_pton(AF_INET, text.c_str(), &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(static_cast<uint16_t>(port));
        len = sizeof(*v4);
    } else if (inet_pton(AF_INET6, text.c_str(), &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(static_cast<uint16_t>(port));
        len = sizeof(*v6);
    } else {
        return "'" + text + "' is not a numeric address";
    }
    const Fd fd(socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) return std::strerror(errno);
    if (connect(fd.get(), reinterpret_cast<const sockaddr *>(&ss), len) == 0 || errno == ECONNREFUSED) return "";
    if (errno != EINPROGRESS) return std::strerror(errno);
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        const long left = ms_until(deadline);
        if (left <= 0) break;
        pollfd p{fd.get(), POLLOUT, 0};
        const int n = poll(&p, 1, static_cast<int>(left));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        int err = 0;
        socklen_t err_len = sizeof(err);
        getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &err_len);
        return err == 0 || err == ECONNREFUSED ? "" : std::strerror(err);
    }
    return "no answer within " + std::to_string(timeout_ms) + " ms";
}

std::vector<HostStatus> check_host_list(const std::vector<HostQuery> &queries, const HostCheckLimits &limits,
                                        HostResolver resolve, HostProber probe) {
    auto s = std::make_shared<CheckState>();
    std::map<std::string, size_t> index;  // host -> its distinct query
    std::vector<size_t> of_query;
    for (const auto &q : queries) {
        auto [it, added] = index.emplace(q.host, s->queries.size());
        if (added) s->queries.push_back(q);
        else s->queries[it->second].probe = s->queries[it->second].probe || q.probe;
        of_query.push_back(it->second);
    }
    s->mine = local_addresses();
    s->limits = limits;
    s->resolve = std::move(resolve);
    s->probe = std::move(probe);
    s->deadline = Clock::now() + std::chrono::milliseconds(limits.deadline_ms);
    s->results.resize(s->queries.size());
    for (size_t i = 0; i < s->queries.size(); ++i) s->results[i].host = s->queries[i].host;

    const size_t nthreads = std::min(s->queries.size(), static_cast<size_t>(std::max(1, limits.threads)));
    std::vector<std::thread> threads;
    {
        // Signals stay with the calling thread; a check thread never handles one.
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        std::lock_guard<std::mutex> lock(s->mutex);
        for (size_t i = 0; i < nthreads; ++i) {
            try {
                threads.emplace_back(check_thread, s);
                ++s->threads_alive;
            } catch (const std::system_error &) {
                break;  // fewer threads than wanted still check every host
            }
        }
        pthread_sigmask(SIG_SETMASK, &old, nullptr);
    }
    std::vector<HostStatus> results;
    bool complete;
    {
        std::unique_lock<std::mutex> lock(s->mutex);
        if (threads.empty()) {  // no thread could start: check here, between the same bounds
            s->threads_alive = 1;
            lock.unlock();
            check_thread(s);
            lock.lock();
        }
        s->changed.wait_until(lock, s->deadline, [&s] {
            return s->threads_alive == 0 || s->failures >= s->limits.max_failures;
        });
        results = s->results;  // a snapshot: abandoned threads keep writing into s, not here
        complete = s->threads_alive == 0;
        const bool stopped = s->failures >= s->limits.max_failures;
        for (auto &r : results)
            if (r.state == HostState::unfinished && stopped) r.state = HostState::not_checked;
    }
    for (auto &t : threads) {
        if (complete) t.join();  // each has left its loop: returns at once
        else t.detach();         // abandoned; it holds its own reference to s
    }
    std::vector<HostStatus> out;
    for (size_t q = 0; q < queries.size(); ++q) {
        out.push_back(results[of_query[q]]);
        out.back().host = queries[q].host;
    }
    return out;
}

}  // namespace ipex::launch
