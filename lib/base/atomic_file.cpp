#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>

#include "base/errors.h"
#include "base/standard_streams.h"

namespace ipex {
namespace {

constexpr size_t kMaxTempFiles = 16;

// Temporary paths live here so the signal handler can unlink them without allocating.
char g_temp_paths[kMaxTempFiles][4096];
volatile sig_atomic_t g_temp_used[kMaxTempFiles];
std::once_flag g_handlers_once;

void on_fatal_signal(int sig) {
    for (size_t i = 0; i < kMaxTempFiles; ++i)
        if (g_temp_used[i]) unlink(g_temp_paths[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

void install_handlers() {
    std::call_once(g_handlers_once, [] {
        for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
            struct sigaction old {};
            sigaction(sig, nullptr, &old);
            if (old.sa_handler == SIG_DFL) signal(sig, on_fatal_signal);
        }
    });
}

int register_temp(const std::string &path) {
    for (size_t i = 0; i < kMaxTempFiles; ++i) {
        if (!g_temp_used[i] && path.size() < sizeof(g_temp_paths[i])) {
            std::strcpy(g_temp_paths[i], path.c_str());
            g_temp_used[i] = 1;
            return static_cast<int>(i);
        }
    }
    return -1;
}

void unregister_temp(int slot) {
    if (slot >= 0) g_temp_used[slot] = 0;
}

std::string parent_dir(const std::string &path) {
    auto slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

}  // namespace

std::string absolute_path(const std::string &path) {
    char buf[PATH_MAX];
    if (realpath(path.c_str(), buf)) return buf;
    const auto slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
    const std::string name = path.substr(slash == std::string::npos ? 0 : slash + 1);
    if (!realpath(dir.c_str(), buf)) return path;
    const std::string base(buf);
    return (base == "/" ? "" : base) + "/" + name;
}

void throw_write_failed(const std::string &dst, const std::string &reason) {
    throw_usage("cannot write '" + dst + "': " + reason);
}

OutputFile::OutputFile(const std::string &tmp, const std::string &dst) : dst_(dst) {
    // tmp == dst for a device or FIFO written in place (write_atomically): no O_CREAT, so a
    // device that vanished in between is not recreated as a file.
    const int create = tmp == dst && output_target(dst) == OutputTarget::in_place ? 0 : O_CREAT | O_TRUNC;
    fd_ = open(tmp.c_str(), O_WRONLY | create | O_CLOEXEC, 0600);
    if (fd_ < 0) throw_write_failed(dst_, std::strerror(errno));
}

OutputFile::~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
}

void OutputFile::write(const void *data, size_t bytes) {
    const char *p = static_cast<const char *>(data);
    while (bytes > 0) {
        const ssize_t n = ::write(fd_, p, bytes);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw_write_failed(dst_, n < 0 ? std::strerror(errno) : "nothing was written");
        p += n;
        bytes -= static_cast<size_t>(n);
    }
}

void OutputFile::close() {
    if (fd_ < 0) return;
    const int fd = fd_;
    fd_ = -1;
    // Data the file system accepted lazily (NFS, a full quota) fails here at the latest.
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
        const int err = errno;
        ::close(fd);
        throw_write_failed(dst_, std::strerror(err));
    }
    if (::close(fd) != 0) throw_write_failed(dst_, std::strerror(errno));
}

void check_input_file(const std::string &path, const std::string &what) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0)
        throw_bad_input(what + " '" + path + "': " + std::strerror(errno));
    if (S_ISDIR(st.st_mode))
        throw_bad_input(what + " '" + path + "' is a directory, expected a file");
    if (!S_ISREG(st.st_mode))
        throw_bad_input(what + " '" + path + "' is not a regular file");
    if (st.st_size == 0) throw_bad_input(what + " '" + path + "' is empty");
    if (access(path.c_str(), R_OK) != 0)
        throw_bad_input(what + " '" + path + "': " + std::strerror(errno));
}

OutputTarget output_target(const std::string &dst) {
    struct stat st {};
    if (stat(dst.c_str(), &st) != 0) return OutputTarget::new_file;
    if (S_ISDIR(st.st_mode)) return OutputTarget::refused;
    // Terminals, /dev/null, pipes and FIFOs, and whatever /dev and /proc name (/dev/stdout is a
    // link to the process's own descriptor, which a rename would detach from the shell's file).
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return OutputTarget::in_place;
    if (S_ISREG(st.st_mode))
        return dst.rfind("/dev/", 0) == 0 || dst.rfind("/proc/", 0) == 0 ? OutputTarget::in_place
                                                                          : OutputTarget::regular;
    return OutputTarget::refused;  // block devices, sockets
}

void check_output_path(const std::string &dst, const std::vector<std::string> &inputs) {
    if (dst.empty()) throw_usage("output path is empty");
    struct stat st {};
    const bool exists = stat(dst.c_str(), &st) == 0;
    const OutputTarget target = output_target(dst);
    if (target == OutputTarget::refused) {
        if (S_ISDIR(st.st_mode)) throw_usage("output '" + dst + "' is a directory; give a file name");
        throw_usage("output '" + dst + "' is neither a regular file nor a character device or FIFO; give a file name");
    }
    // A device or FIFO is no input's copy (an input of /dev/null is still fine beside it).
    if (exists && S_ISREG(st.st_mode)) {
        for (const auto &in : inputs) {
            struct stat in_st {};
            if (stat(in.c_str(), &in_st) == 0 && in_st.st_dev == st.st_dev &&
                in_st.st_ino == st.st_ino)
                throw_usage("output '" + dst + "' is the same file as input '" + in +
                            "'; write to a new file");
        }
    }
    if (target == OutputTarget::in_place) {
        if (access(dst.c_str(), W_OK) != 0) throw_write_failed(dst, std::strerror(errno));
        return;
    }
    const std::string dir = parent_dir(absolute_path(dst));
    struct stat dir_st {};
    if (stat(dir.c_str(), &dir_st) != 0 || !S_ISDIR(dir_st.st_mode))
        throw_usage("cannot write '" + dst + "': directory '" + dir +
                    "' does not exist; create it first");
    if (access(dir.c_str(), W_OK) != 0)
        throw_usage("cannot write '" + dst + "': directory '" + dir +
                    "' is not writable");
    if (exists && access(dst.c_str(), W_OK) != 0)
        throw_usage("cannot write '" + dst + "': file is not writable");
}

void write_atomically(const std::string &dst_path,
                      const std::function<void(const std::string &tmp)> &writer) {
    switch (output_target(dst_path)) {
        case OutputTarget::refused: check_output_path(dst_path, {}); break;  // throws its message
        case OutputTarget::in_place:
            // Nothing to rename onto: the writer writes the device or pipe itself, and a failed
            // run never removes it.
            writer(dst_path);
            return;
        case OutputTarget::regular:
        case OutputTarget::new_file: break;
    }
    install_handlers();
    // A symbolic link to a regular file keeps being a link: the file it names is replaced.
    const std::string dst = absolute_path(dst_path);
    const std::string dir = parent_dir(dst);
    // "<stem>.ipex-tmpXXXXXX": PyTorch names a saved archive's root folder after the file
    // name up to its extension, so the stem must survive.
    std::string base = dst.substr(dst.find_last_of('/') == std::string::npos ? 0 : dst.find_last_of('/') + 1);
    const std::string stem = base.substr(0, base.find_last_of('.'));
    std::string pattern = dir + "/" + (stem.empty() ? std::string("out") : stem) + ".ipex-tmpXXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    int fd = mkstemp(buf.data());
    if (fd < 0)
        throw_write_failed(dst_path, std::string("cannot create a temporary file in '") + dir + "': " +
                                         std::strerror(errno));
    close(fd);
    const std::string tmp(buf.data());
    const int slot = register_temp(tmp);
    try {
        writer(tmp);
        // Keep the permissions a normally created file would get.
        mode_t mask = umask(0);
        umask(mask);
        chmod(tmp.c_str(), 0666 & ~mask);
        if (rename(tmp.c_str(), dst.c_str()) != 0)
            throw_write_failed(dst_path, std::strerror(errno));
    } catch (...) {
        unlink(tmp.c_str());
        unregister_temp(slot);
        throw;
    }
    unregister_temp(slot);
}

void write_text_atomically(const std::string &dst, const std::string &text) {
    if (dst == "-") {
        std::cout << text;
        check_stdout();
        return;
    }
    check_output_path(dst, {});
    write_atomically(dst, [&](const std::string &tmp) {
        OutputFile out(tmp, dst);
        out.write(text);
        out.close();
    });
}

}  // namespace ipex
