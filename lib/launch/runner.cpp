#include "launch/runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/errors.h"
#include "base/log.h"

namespace ipex::launch {
namespace {

using Clock = std::chrono::steady_clock;

// Written by the signal handler, read by the event loop.
int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
    const int saved = errno;
    const unsigned char byte = static_cast<unsigned char>(sig);
    (void)!write(g_signal_pipe[1], &byte, 1);
    errno = saved;
}

constexpr int kHandled[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
constexpr size_t kMaxLine = 1 << 16;  // longest line kept whole for the console prefix

// Records the child sends back on its status pipe before exec.
struct ChildRecord {
    char kind;  // 'A' affinity failed, 'M' memory policy refused, 'E' exec failed
    int err;
};

void write_all(int fd, const char *data, size_t size) {
    while (size > 0) {
        const ssize_t n = write(fd, data, size);
        if (n < 0) {
            if (errno == EINTR) continue;
            return;  // a closed console or full disk must not stop the instances
        }
        data += n;
        size -= static_cast<size_t>(n);
    }
}

struct Stream {
    int fd = -1;
    int console_fd = 1;
    std::string partial;
};

struct Instance {
    const RunSpec *spec = nullptr;
    InstanceOutcome outcome;
    Stream out, err;
    int log_fd = -1;
    bool running = false;
    Clock::time_point start;
};

class Loop {
public:
    Loop(std::vector<Instance> &instances, const RunSettings &settings)
        : instances_(instances), settings_(settings) {}

    void run();

private:
    void handle_line(Instance &inst, Stream &stream, const std::string &line);
    void read_stream(Instance &inst, Stream &stream, bool until_eagain);
    void close_stream(Instance &inst, Stream &stream);
    void reap();
    void signal_all(int sig);        // through settings_.deliver_signal when set
    void signal_groups(int sig);     // to every running instance's process group
    void read_control();
    bool busy() const;

    std::vector<Instance> &instances_;
    const RunSettings &settings_;
    int forwarded_ = 0;
    bool stopping_ = false;  // a signal was forwarded or the timeout hit
    bool control_open_ = false;
};

void Loop::handle_line(Instance &inst, Stream &stream, const std::string &line) {
    const bool verbose_line =
        line.rfind("onednn_verbose,", 0) == 0 || line.rfind("dnnl_verbose,", 0) == 0;
    if (settings_.parse_verbose && verbose_line) {
        if (auto exec = parse_verbose_line(line)) {
            inst.outcome.verbose.add(*exec);
        } else {
            parse_verbose_info_line(line, inst.outcome.verbose_info);
        }
    }
    if (!settings_.console || (verbose_line && settings_.hide_verbose_lines)) return;
    const std::string &label = inst.spec->label;
    const std::string text =
        "[" + (label.empty() ? std::to_string(inst.spec->index) : label) + "] " + line + "\n";
    write_all(stream.console_fd, text.data(), text.size());
}

void Loop::read_stream(Instance &inst, Stream &stream, bool until_eagain) {
    char buf[65536];
    while (stream.fd >= 0) {
        const ssize_t n = read(stream.fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN) close_stream(inst, stream);
            return;
        }
        if (settings_.on_output) {
            settings_.on_output(*inst.spec, &stream == &inst.out ? 1 : 2, buf,
                                static_cast<size_t>(n));
            if (!until_eagain) return;
            continue;
        }
        if (inst.log_fd >= 0) write_all(inst.log_fd, buf, static_cast<size_t>(n));
        stream.partial.append(buf, static_cast<size_t>(n));
        size_t start = 0, nl;
        while ((nl = stream.partial.find('\n', start)) != std::string::npos) {
            std::string line = stream.partial.substr(start, nl - start);
            if (!line.empty() && line.back() == '\r') line.pop_back();
            handle_line(inst, stream, line);
            start = nl + 1;
        }
        stream.partial.erase(0, start);
        if (stream.partial.size() > kMaxLine) {  // output without newlines: pass it on in pieces
            handle_line(inst, stream, stream.partial);
            stream.partial.clear();
        }
        if (!until_eagain) return;
    }
}

void Loop::close_stream(Instance &inst, Stream &stream) {
    if (stream.fd < 0) return;
    if (!stream.partial.empty()) handle_line(inst, stream, stream.partial);
    stream.partial.clear();
    close(stream.fd);
    stream.fd = -1;
}

void Loop::reap() {
    for (auto &inst : instances_) {
        if (!inst.running) continue;
        int status = 0;
        struct rusage usage {};
        const pid_t r = wait4(inst.outcome.pid, &status, WNOHANG, &usage);
        if (r != inst.outcome.pid) continue;
        inst.running = false;
        inst.outcome.wall_seconds =
            std::chrono::duration<double>(Clock::now() - inst.start).count();
        inst.outcome.peak_rss_kib = usage.ru_maxrss;
        if (WIFEXITED(status)) inst.outcome.exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) inst.outcome.signal = WTERMSIG(status);
        // Output already written is in the pipe; background processes the instance left
        // behind do not keep it open past this point.
        read_stream(inst, inst.out, true);
        read_stream(inst, inst.err, true);
        close_stream(inst, inst.out);
        close_stream(inst, inst.err);
        // When stopping, nothing the instance started may outlive it (a shell's
        // background jobs ignore SIGINT, for one).
        if (stopping_) kill(-inst.outcome.pid, SIGKILL);
    }
}

void Loop::signal_groups(int sig) {
    for (auto &inst : instances_)
        if (inst.running) kill(-inst.outcome.pid, sig);
}

void Loop::signal_all(int sig) {
    if (settings_.deliver_signal && settings_.deliver_signal(sig)) return;
    signal_groups(sig);
}

void Loop::read_control() {
    const int sig = settings_.on_control();
    if (sig < 0) {
        control_open_ = false;
        return;
    }
    if (sig == 0) return;
    stopping_ = true;
    log::verbose(std::string("asked to pass on SIG") + sigabbrev_np(sig));
    signal_groups(sig);
}

bool Loop::busy() const {
    for (const auto &inst : instances_)
        if (inst.running || inst.out.fd >= 0 || inst.err.fd >= 0) return true;
    return false;
}

void Loop::run() {
    const auto started = Clock::now();
    const bool has_timeout = settings_.timeout_seconds > 0;
    const auto deadline = started + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(settings_.timeout_seconds));
    bool timed_out = false;
    Clock::time_point kill_at{};
    bool killed = false;
    bool groups_killed = false;  // the last resort when a hook's SIGKILL did not end them
    control_open_ = settings_.control_fd >= 0 && settings_.on_control;
    reap();  // instances that failed to start may already be gone
    while (busy()) {
        std::vector<pollfd> fds{{g_signal_pipe[0], POLLIN, 0}};
        std::vector<std::pair<Instance *, Stream *>> owners{{nullptr, nullptr}};
        const bool poll_control = control_open_;
        if (poll_control) {
            fds.push_back({settings_.control_fd, POLLIN, 0});
            owners.emplace_back(nullptr, nullptr);
        }
        for (auto &inst : instances_)
            for (Stream *s : {&inst.out, &inst.err})
                if (s->fd >= 0) {
                    fds.push_back({s->fd, POLLIN, 0});
                    owners.emplace_back(&inst, s);
                }
        int wait_ms = 1000;  // also bounds the delay of a reap missed between polls
        const auto now = Clock::now();
        if (has_timeout && !timed_out)
            wait_ms = static_cast<int>(std::max<long>(
                0, std::min<long>(wait_ms, std::chrono::duration_cast<std::chrono::milliseconds>(
                                               deadline - now).count() + 1)));
        const int n = poll(fds.data(), fds.size(), wait_ms);
        if (n < 0 && errno != EINTR) throw_internal(std::string("poll: ") + std::strerror(errno));
        if (n > 0 && (fds[0].revents & POLLIN)) {
            unsigned char sigs[64];
            const ssize_t got = read(g_signal_pipe[0], sigs, sizeof(sigs));
            for (ssize_t i = 0; i < got; ++i) {
                if (sigs[i] == SIGCHLD) continue;
                ++forwarded_;
                stopping_ = true;
                const bool escalate = forwarded_ > 1 && settings_.escalate_repeated_signals;
                const int sig = escalate ? SIGKILL : sigs[i];
                log::info(std::string("received SIG") + sigabbrev_np(sigs[i]) + "; sending SIG" +
                          sigabbrev_np(sig) + " to " + settings_.signal_targets +
                          (forwarded_ == 1 && settings_.escalate_repeated_signals ? " (signal again to kill them)"
                                                                                 : ""));
                // A third signal does not trust the hook: the process groups themselves go.
                if (escalate && forwarded_ > 2) signal_groups(SIGKILL);
                else signal_all(sig);
            }
        }
        const size_t first_stream = poll_control ? 2 : 1;
        if (n > 0 && poll_control && fds[1].revents) read_control();
        for (size_t i = first_stream; n > 0 && i < fds.size(); ++i)
            if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
                read_stream(*owners[i].first, *owners[i].second, false);
        reap();
        if (has_timeout && !timed_out && Clock::now() >= deadline) {
            timed_out = true;
            stopping_ = true;
            for (auto &inst : instances_) inst.outcome.timed_out = inst.running;
            signal_all(SIGTERM);
            kill_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(settings_.kill_grace_seconds));
        }
        if (timed_out && !killed && Clock::now() >= kill_at) {
            killed = true;
            signal_all(SIGKILL);
            kill_at += std::chrono::duration_cast<Clock::duration>(
                std::chrono::duration<double>(settings_.kill_grace_seconds));
        } else if (killed && !groups_killed && settings_.deliver_signal && Clock::now() >= kill_at) {
            groups_killed = true;
            signal_groups(SIGKILL);
        }
    }
}

// Opens the log file, pipes and forks one instance; the child binds and execs.
void open_log(Instance &inst) {
    const RunSpec &spec = *inst.spec;
    if (spec.log_path.empty()) return;
    inst.log_fd = open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (inst.log_fd < 0)
        throw_usage("cannot write '" + spec.log_path + "': " + std::strerror(errno) + " (check --log-dir)");
}

void start(Instance &inst, bool stdout_to_stderr) {
    const RunSpec &spec = *inst.spec;
    inst.outcome.index = spec.index;
    int out[2], err[2], status[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(status, O_CLOEXEC) != 0)
        throw_internal(std::string("pipe: ") + std::strerror(errno));

    std::vector<char *> argv, envp;
    for (const auto &a : spec.argv) argv.push_back(const_cast<char *>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto &e : spec.envp) envp.push_back(const_cast<char *>(e.c_str()));
    envp.push_back(nullptr);

    inst.start = Clock::now();
    const pid_t launcher = getpid();
    const pid_t pid = fork();
    if (pid < 0) throw_internal(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        // If the launcher dies without forwarding anything (SIGKILL), stop the instance too.
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != launcher) _exit(127);
        for (int sig : kHandled) signal(sig, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        const int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        dup2(out[1], 1);
        dup2(err[1], 2);
        const BindOutcome bound = apply_binding(spec.binding);
        if (bound.affinity_errno != 0) {
            const ChildRecord rec{'A', bound.affinity_errno};
            (void)!write(status[1], &rec, sizeof(rec));
            _exit(127);
        }
        if (bound.membind_errno != 0) {
            const ChildRecord rec{'M', bound.membind_errno};
            (void)!write(status[1], &rec, sizeof(rec));
        }
        execve(spec.executable.c_str(), argv.data(), envp.data());
        const ChildRecord rec{'E', errno};
        (void)!write(status[1], &rec, sizeof(rec));
        _exit(127);
    }
    setpgid(pid, pid);
    inst.running = true;
    inst.outcome.pid = pid;
    close(out[1]);
    close(err[1]);
    close(status[1]);
    ChildRecord rec{};
    ssize_t got;
    while ((got = read(status[0], &rec, sizeof(rec))) != 0) {
        if (got < 0 && errno == EINTR) continue;
        if (got != static_cast<ssize_t>(sizeof(rec))) break;
        if (rec.kind == 'M') inst.outcome.membind_errno = rec.err;
        if (rec.kind == 'A')
            inst.outcome.start_error = std::string("cannot set CPU affinity: ") + std::strerror(rec.err);
        if (rec.kind == 'E')
            inst.outcome.start_error = "cannot execute " + spec.executable + ": " + std::strerror(rec.err);
    }
    close(status[0]);
    inst.out = {out[0], stdout_to_stderr ? 2 : 1, {}};
    inst.err = {err[0], 2, {}};
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
}

// Installs the self-pipe handlers for the lifetime of a run and restores them after.
class SignalScope {
public:
    SignalScope() {
        if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
            throw_internal(std::string("pipe: ") + std::strerror(errno));
        struct sigaction sa {};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        for (size_t i = 0; i < std::size(kHandled); ++i) sigaction(kHandled[i], &sa, &old_[i]);
        struct sigaction ign {};
        ign.sa_handler = SIG_IGN;
        sigaction(SIGPIPE, &ign, &old_pipe_);
    }
    ~SignalScope() {
        for (size_t i = 0; i < std::size(kHandled); ++i) sigaction(kHandled[i], &old_[i], nullptr);
        sigaction(SIGPIPE, &old_pipe_, nullptr);
        close(g_signal_pipe[0]);
        close(g_signal_pipe[1]);
        g_signal_pipe[0] = g_signal_pipe[1] = -1;
    }

private:
    struct sigaction old_[std::size(kHandled)] {};
    struct sigaction old_pipe_ {};
};

}  // namespace

std::string InstanceOutcome::status_text() const {
    if (!start_error.empty()) return "not started";
    if (signal != 0) {
        const char *name = sigabbrev_np(signal);
        return "signal " + std::to_string(signal) + (name ? std::string(" (SIG") + name + ")" : "") +
               (timed_out ? ", timed out" : "");
    }
    return "exit " + std::to_string(exit_code) + (timed_out ? ", timed out" : "");
}

std::vector<InstanceOutcome> run_instances(const std::vector<RunSpec> &specs,
                                           const RunSettings &settings) {
    std::vector<Instance> instances(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
        instances[i].spec = &specs[i];
        try {
            open_log(instances[i]);
        } catch (...) {
            for (auto &inst : instances)
                if (inst.log_fd >= 0) close(inst.log_fd);
            throw;
        }
    }
    SignalScope signals;
    for (size_t i = 0; i < specs.size(); ++i) {
        try {
            start(instances[i], settings.stdout_to_stderr);
        } catch (...) {
            for (auto &inst : instances)
                if (inst.running) kill(-inst.outcome.pid, SIGKILL), waitpid(inst.outcome.pid, nullptr, 0);
            throw;
        }
    }
    Loop(instances, settings).run();
    std::vector<InstanceOutcome> out;
    for (auto &inst : instances) {
        if (inst.log_fd >= 0) close(inst.log_fd);
        out.push_back(std::move(inst.outcome));
    }
    return out;
}

}  // namespace ipex::launch
