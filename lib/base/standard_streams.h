// Standard output that never loses a result silently, header-only and torch-free so that every
// binary (ipex-tool through run_guarded, ipex-launch through its guarded_main) uses it.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "base/errors.h"

namespace ipex {

namespace detail {
inline bool g_stdout_closed = false;
}  // namespace detail

// First thing in a binary: a closed descriptor 0, 1 or 2 is opened on a device (stdout on
// /dev/full, so that writes fail and are reported) so that no file the tool opens takes its
// number and receives text meant for the terminal.
inline void guard_standard_streams() {
    for (int fd = 0; fd <= 2; ++fd) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        const int opened = open(fd == 1 ? "/dev/full" : "/dev/null", (fd == 0 ? O_RDONLY : O_WRONLY) | O_CLOEXEC);
        if (opened >= 0 && opened != fd) {  // should not happen: open takes the lowest free number
            dup2(opened, fd);
            close(opened);
        } else if (opened == fd) {
            fcntl(fd, F_SETFD, 0);  // inherited by the programs a launcher starts, like the original
        }
        if (fd == 1) detail::g_stdout_closed = true;
    }
}

// Flushes std::cout and stdout; exit 2 "cannot write standard output" when any write to it
// failed (a full disk, /dev/full, a closed stdout). Reported once.
inline void check_stdout() {
    std::cout.flush();
    errno = 0;
    const bool flush_failed = std::fflush(stdout) != 0;
    const int err = errno;
    if (!flush_failed && !std::ferror(stdout) && std::cout.good()) return;
    std::clearerr(stdout);
    std::cout.clear();
    const std::string reason = detail::g_stdout_closed ? "it is closed"
                               : err != 0              ? std::strerror(err)
                                                       : "a write failed";
    throw Error(ExitCode::usage, "cannot write standard output: " + reason +
                                     "; the output is lost (redirect it to a file with room, or use --json FILE "
                                     "where the command has it)");
}

}  // namespace ipex
