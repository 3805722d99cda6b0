#include "launch/rank_exec.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>

#include "base/errors.h"
#include "base/log.h"
#include "launch/mpi_plan.h"
#include "launch/rank_report.h"
#include "launch/runner.h"

namespace ipex::launch {
namespace {

constexpr int kConnectTimeoutMs = 10000;

std::vector<std::string> split_commas(const std::string &text) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos <= text.size() && !text.empty()) {
        size_t end = text.find(',', pos);
        if (end == std::string::npos) end = text.size();
        out.push_back(text.substr(pos, end - pos));
        pos = end + 1;
    }
    return out;
}

// The connection to the launcher; without one, nothing is sent. Output and the exit status
// go up it; the launcher's requests to pass a signal on come down it.
class Channel {
public:
    explicit Channel(const std::string &report_to) {
        if (report_to.empty()) return;
        std::string error;
        fd_ = connect_report(report_to, kConnectTimeoutMs, error);
        if (fd_ < 0) log::warn("cannot report to the launcher (" + error + "); writing output here");
    }
    ~Channel() {
        if (fd_ >= 0) close(fd_);
    }
    Channel(const Channel &) = delete;
    Channel &operator=(const Channel &) = delete;
    bool connected() const { return fd_ >= 0 && !broken_; }
    int fd() const { return fd_; }

    // The signal the launcher asked for since the last call (the last one asked), 0 for
    // none, -1 once the channel is closed or garbled.
    int read_request() {
        char buf[256];
        const ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
        if (n <= 0) return -1;
        requests_.append(buf, static_cast<size_t>(n));
        int sig = 0;
        try {
            while (auto frame = take_frame(requests_))
                if (const int asked = requested_signal(*frame)) sig = asked;
        } catch (const Error &) {
            return -1;
        }
        return sig;
    }

    void send(FrameKind kind, const std::string &payload) {
        if (!connected()) return;
        const std::string frame = encode_frame(kind, payload);
        const char *data = frame.data();
        size_t left = frame.size();
        while (left > 0) {
            const ssize_t n = ::send(fd_, data, left, MSG_NOSIGNAL);  // a gone launcher is no SIGPIPE
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {  // the launcher is gone: the output has nowhere to go
                broken_ = true;
                return;
            }
            data += n;
            left -= static_cast<size_t>(n);
        }
    }
    void send_bytes(int stream, const char *data, size_t size) {
        while (size > 0) {
            const size_t n = std::min(size, kMaxFramePayload);
            send(stream == 1 ? FrameKind::out : FrameKind::err, std::string(data, n));
            data += n;
            size -= n;
        }
    }

private:
    int fd_ = -1;
    bool broken_ = false;  // a send failed; fd_ stays open (and polled) until the end
    std::string requests_;  // bytes of K frames not yet whole
};

std::string hostname() {
    char buf[256] = {0};
    gethostname(buf, sizeof(buf) - 1);
    return buf;
}

}  // namespace

int run_rank(const LaunchOptions &opts) {
    // What a rank says reaches the console through mpirun; the launcher already says it.
    if (!opts.verbose) log::set_level(log::Level::quiet);
    const Environment env = current_environment();
    const auto id = rank_identity(env);
    if (!id)
        throw_usage("--rank-exec runs one rank under mpirun; start a multi-node run with "
                   "ipex-launch --nnodes N --hostfile FILE -- PROGRAM");
    const auto hosts = split_commas(opts.rank_hosts);
    const int ppn = opts.nprocs_per_node.value_or(0);
    const int nnodes = opts.nnodes.value_or(0);
    const int host_index = ppn > 0 ? id->rank / ppn : 0;
    const std::string host = host_index < static_cast<int>(hosts.size()) ? hosts[static_cast<size_t>(host_index)]
                                                                          : hostname();
    Channel channel(opts.report_to);
    nlohmann::json hello{{"token", report_token(opts.report_to)},
                         {"rank", id->rank},
                         {"pid", static_cast<long>(getpid())},
                         {"hostname", hostname()}};

    InstancePlan ip;
    try {
        if (ppn < 1 || id->local_world_size != ppn || id->world_size != ppn * nnodes)
            throw_usage("the MPI process manager started " + std::to_string(id->world_size) + " ranks, " +
                       std::to_string(id->local_world_size) + " on this host, but the plan has " +
                       std::to_string(nnodes) + " hosts x " + std::to_string(ppn) +
                       " ranks; do not pass -np/-ppn/--map-by in --extra-mpi-params");
        LaunchPlan plan = make_plan(host_options(opts, ppn), load_this_machine(), env);
        ip = plan.instances.at(static_cast<size_t>(id->local_rank));
        add_rank_variables(ip.env, *id, opts.master_addr, opts.master_port, nnodes);
        RunSpec spec;
        spec.index = id->rank;
        spec.label = host + ":" + std::to_string(id->rank);
        spec.executable = ip.executable;
        spec.argv = ip.command;
        for (const auto &[name, value] : apply_env(env, ip.env)) spec.envp.push_back(name + "=" + value);
        spec.binding = prepare_binding(ip.placement, plan.task_manager);
        spec.binding.membind = spec.binding.membind && plan.membind;

        hello["placement"] = placement_to_json(ip.placement);
        channel.send(FrameKind::hello, hello.dump());
        RunSettings settings;
        settings.escalate_repeated_signals = false;
        bool stop_requested = false;  // the launcher passed a signal on
        if (channel.connected()) {
            settings.on_output = [&channel](const RunSpec &, int stream, const char *data, size_t size) {
                channel.send_bytes(stream, data, size);
            };
            settings.control_fd = channel.fd();
            settings.on_control = [&channel, &stop_requested] {
                const int sig = channel.read_request();
                stop_requested = stop_requested || sig > 0;
                return sig;
            };
        }
        const InstanceOutcome outcome = run_instances({spec}, settings).front();
        channel.send(FrameKind::status, outcome_to_json(outcome).dump());
        if (!outcome.start_error.empty()) {
            if (!channel.connected()) log::warn("rank " + std::to_string(id->rank) + ": " + outcome.start_error);
            return 127;
        }
        // Stopped at the launcher's request, with the status delivered: mpirun hears 0. A
        // non-zero exit would make mpirun end the job itself, sending the ranks still in
        // their signal handlers SIGTERM and then SIGKILL on its own timer.
        if (stop_requested && channel.connected()) return 0;
        return outcome.signal ? 128 + outcome.signal : outcome.exit_code;
    } catch (const Error &e) {
        if (!channel.connected()) throw;
        InstanceOutcome failed;
        failed.index = id->rank;
        failed.start_error = e.what();
        channel.send(FrameKind::hello, hello.dump());
        channel.send(FrameKind::status, outcome_to_json(failed).dump());
        return static_cast<int>(e.code());
    }
}

}  // namespace ipex::launch
