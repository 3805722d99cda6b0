#include "launch/rank_collector.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/errors.h"
#include "base/log.h"

namespace ipex::launch {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxLine = 1 << 16;  // longest line kept whole for the console prefix

void write_all(int fd, const char *data, size_t size) {
    while (size > 0) {
        const ssize_t n = write(fd, data, size);
        if (n < 0) {
            if (errno == EINTR) continue;
            return;
        }
        data += n;
        size -= static_cast<size_t>(n);
    }
}

struct Connection {
    int fd = -1;
    int rank = -1;  // -1 until a valid hello
    std::string buf;
};

struct RankStreams {
    std::string out, err;  // partial lines
    int log_fd = -1;
};

}  // namespace

struct RankCollector::State {
    int listen_fd = -1;
    std::string token;
    CollectorSettings settings;
    std::vector<RankResult> results;
    std::vector<RankStreams> streams;
    std::vector<Connection> connections;
    int stop_pipe[2] = {-1, -1};
    std::atomic<double> grace_seconds{0};
    std::thread thread;
    // What signal_ranks() needs, shared with the thread and held only for a moment: each
    // rank's open connection (-1: none) and whether its status came. A connection is
    // closed under the lock, so a signal never goes to a closed or reused descriptor.
    std::mutex signal_mutex;
    std::vector<int> rank_fds;
    std::vector<bool> rank_done;
    void close_connection(const Connection &c);

    void run();
    void accept_all();
    bool read_connection(Connection &c);  // false when it ended
    void handle_frame(Connection &c, const Frame &f);
    void handle_bytes(int rank, int stream, const std::string &data);
    void handle_line(int rank, int stream, const std::string &line);
    void flush(int rank);
};

void RankCollector::State::handle_line(int rank, int stream, const std::string &line) {
    const bool verbose_line = line.rfind("onednn_verbose,", 0) == 0 || line.rfind("dnnl_verbose,", 0) == 0;
    RankResult &r = results[static_cast<size_t>(rank)];
    if (settings.parse_verbose && verbose_line) {
        if (auto exec = parse_verbose_line(line)) r.outcome.verbose.add(*exec);
        else parse_verbose_info_line(line, r.outcome.verbose_info);
    }
    if (verbose_line && settings.hide_verbose_lines) return;
    const std::string text = "[" + settings.labels[static_cast<size_t>(rank)] + "] " + line + "\n";
    write_all(stream == 2 || settings.stdout_to_stderr ? 2 : 1, text.data(), text.size());
}

void RankCollector::State::handle_bytes(int rank, int stream, const std::string &data) {
    RankStreams &s = streams[static_cast<size_t>(rank)];
    if (s.log_fd >= 0) write_all(s.log_fd, data.data(), data.size());
    std::string &partial = stream == 1 ? s.out : s.err;
    partial += data;
    size_t start = 0, nl;
    while ((nl = partial.find('\n', start)) != std::string::npos) {
        std::string line = partial.substr(start, nl - start);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        handle_line(rank, stream, line);
        start = nl + 1;
    }
    partial.erase(0, start);
    if (partial.size() > kMaxLine) {
        handle_line(rank, stream, partial);
        partial.clear();
    }
}

void RankCollector::State::flush(int rank) {
    RankStreams &s = streams[static_cast<size_t>(rank)];
    if (!s.out.empty()) handle_line(rank, 1, s.out);
    if (!s.err.empty()) handle_line(rank, 2, s.err);
    s.out.clear();
    s.err.clear();
}

void RankCollector::State::handle_frame(Connection &c, const Frame &f) {
    if (c.rank < 0) {
        if (f.kind != FrameKind::hello) throw Error(ExitCode::bad_input, "first frame is not a hello");
        const auto j = nlohmann::json::parse(f.payload, nullptr, false);
        if (!j.is_object() || j.value("token", std::string()) != token)
            throw Error(ExitCode::bad_input, "hello without the run's token");
        const int rank = j.value("rank", -1);
        if (rank < 0 || rank >= static_cast<int>(results.size()) || results[static_cast<size_t>(rank)].started)
            throw Error(ExitCode::bad_input, "hello from an unknown or repeated rank");
        c.rank = rank;
        {
            std::lock_guard<std::mutex> lock(signal_mutex);
            rank_fds[static_cast<size_t>(rank)] = c.fd;
        }
        RankResult &r = results[static_cast<size_t>(rank)];
        r.started = true;
        r.hostname = j.value("hostname", std::string());
        r.outcome.index = rank;
        r.outcome.pid = static_cast<pid_t>(j.value("pid", -1L));
        if (j.contains("placement")) r.placement = placement_from_json(j["placement"]);
        return;
    }
    RankResult &r = results[static_cast<size_t>(c.rank)];
    switch (f.kind) {
    case FrameKind::out: handle_bytes(c.rank, 1, f.payload); break;
    case FrameKind::err: handle_bytes(c.rank, 2, f.payload); break;
    case FrameKind::status: {
        const auto j = nlohmann::json::parse(f.payload, nullptr, false);
        InstanceOutcome o = outcome_from_json(j);
        o.index = c.rank;
        o.verbose = r.outcome.verbose;
        o.verbose_info = r.outcome.verbose_info;
        r.outcome = o;
        r.finished = true;
        {
            std::lock_guard<std::mutex> lock(signal_mutex);
            rank_done[static_cast<size_t>(c.rank)] = true;
        }
        break;
    }
    case FrameKind::hello: break;  // a rank that failed late says hello again
    case FrameKind::signal: break;  // launcher to rank only
    }
}

bool RankCollector::State::read_connection(Connection &c) {
    char buf[65536];
    const ssize_t n = read(c.fd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n <= 0) return false;
    c.buf.append(buf, static_cast<size_t>(n));
    try {
        while (auto frame = take_frame(c.buf)) handle_frame(c, *frame);
    } catch (const Error &e) {
        log::warn("dropped a connection to the rank report port: " + std::string(e.what()));
        return false;
    }
    return true;
}

void RankCollector::State::accept_all() {
    for (;;) {
        const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;
        connections.push_back({fd, -1, {}});
    }
}

void RankCollector::State::run() {
    bool stopping = false;
    Clock::time_point deadline{};
    for (;;) {
        if (stopping && (connections.empty() || Clock::now() >= deadline)) break;
        std::vector<pollfd> fds{{stop_pipe[0], POLLIN, 0}, {listen_fd, POLLIN, 0}};
        for (const auto &c : connections) fds.push_back({c.fd, POLLIN, 0});
        int wait_ms = 1000;
        if (stopping)
            wait_ms = static_cast<int>(std::max<long>(
                0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
        const int n = poll(fds.data(), fds.size(), wait_ms);
        if (n < 0 && errno != EINTR) break;
        if (n <= 0) continue;
        if (fds[0].revents & POLLIN) {
            char byte;
            (void)!read(stop_pipe[0], &byte, 1);
            stopping = true;
            accept_all();  // ranks that connected but were not accepted yet
            deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(grace_seconds.load()));
        }
        if (fds[1].revents & POLLIN) accept_all();
        std::vector<Connection> open;
        for (size_t i = 2; i < fds.size(); ++i) {
            Connection &c = connections[i - 2];
            if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) && !read_connection(c)) {
                if (c.rank >= 0) flush(c.rank);
                close_connection(c);
                continue;
            }
            open.push_back(std::move(c));
        }
        // Connections accepted in this round were appended after the polled ones.
        for (size_t i = fds.size() - 2; i < connections.size(); ++i) open.push_back(std::move(connections[i]));
        connections = std::move(open);
    }
    for (auto &c : connections) {
        if (c.rank >= 0) flush(c.rank);
        close_connection(c);
    }
    connections.clear();
}

void RankCollector::State::close_connection(const Connection &c) {
    std::lock_guard<std::mutex> lock(signal_mutex);
    if (c.rank >= 0) rank_fds[static_cast<size_t>(c.rank)] = -1;
    close(c.fd);
}

RankCollector::RankCollector(const ReportListener &listener, CollectorSettings settings)
    : state_(std::make_unique<State>()) {
    State &s = *state_;
    s.listen_fd = listener.fd();
    s.token = listener.token();
    s.settings = std::move(settings);
    const size_t n = s.settings.labels.size();
    s.results.resize(n);
    s.streams.resize(n);
    s.rank_fds.assign(n, -1);
    s.rank_done.assign(n, false);
    for (size_t i = 0; i < n; ++i) {
        const std::string &path = i < s.settings.log_paths.size() ? s.settings.log_paths[i] : "";
        if (path.empty()) continue;
        s.streams[i].log_fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (s.streams[i].log_fd < 0) {
            const int err = errno;
            for (auto &st : s.streams)
                if (st.log_fd >= 0) close(st.log_fd);
            throw_usage("cannot write '" + path + "': " + std::strerror(err) + " (check --log-dir)");
        }
    }
    if (pipe2(s.stop_pipe, O_CLOEXEC) != 0) throw_internal(std::string("pipe: ") + std::strerror(errno));
    // Signals go to the main thread, which forwards them to mpirun.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    s.thread = std::thread([&s] { s.run(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

bool RankCollector::signal_ranks(int sig) {
    State &s = *state_;
    const std::string frame = signal_frame(sig);
    std::lock_guard<std::mutex> lock(s.signal_mutex);
    bool all = true;
    for (size_t r = 0; r < s.rank_fds.size(); ++r) {
        if (s.rank_done[r]) continue;
        // A few bytes on a socket the launcher otherwise only reads: they fit, or the rank
        // counts as not reached (and mpirun gets the signal).
        const bool sent = s.rank_fds[r] >= 0 && send(s.rank_fds[r], frame.data(), frame.size(),
                                                     MSG_DONTWAIT | MSG_NOSIGNAL) ==
                                                    static_cast<ssize_t>(frame.size());
        all = all && sent;
    }
    return all;
}

std::vector<RankResult> RankCollector::finish(double grace_seconds) {
    State &s = *state_;
    if (s.thread.joinable()) {
        s.grace_seconds = grace_seconds;
        const char byte = 1;
        (void)!write(s.stop_pipe[1], &byte, 1);
        s.thread.join();
    }
    return s.results;
}

RankCollector::~RankCollector() {
    finish(0);
    for (auto &st : state_->streams)
        if (st.log_fd >= 0) close(st.log_fd);
    close(state_->stop_pipe[0]);
    close(state_->stop_pipe[1]);
}

}  // namespace ipex::launch
