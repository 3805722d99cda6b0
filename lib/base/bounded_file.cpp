#include "base/bounded_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/errors.h"

namespace ipex {
namespace {

constexpr size_t kChunkBytes = size_t(1) << 20;

// Closes a descriptor on every path out of read_bounded_file.
struct Fd {
    int fd;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

// `size`: "is 5.0 GiB" or "holds more than 64 MiB".
[[noreturn]] void too_large(const std::string &what, const std::string &path, const std::string &size,
                            uint64_t limit) {
    throw_bad_input(what + " '" + path + "' " + size + "; a " + what + " may hold at most " + format_bytes(limit) +
                    " (is it the right file?)");
}

}  // namespace

std::string format_bytes(uint64_t bytes) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    size_t unit = 0;
    while (unit + 1 < sizeof(units) / sizeof(units[0]) && bytes >= (uint64_t(1) << (10 * (unit + 1)))) ++unit;
    if (unit == 0) return std::to_string(bytes) + " B";
    const uint64_t whole = bytes >> (10 * unit);
    if (whole << (10 * unit) == bytes) return std::to_string(whole) + " " + units[unit];
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f %s", static_cast<double>(bytes) / double(uint64_t(1) << (10 * unit)),
                  units[unit]);
    return buf;
}

uint64_t file_size(const std::string &path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

std::string read_bounded_file(const std::string &path, uint64_t limit, const std::string &what) {
    // Opened first, checked through the descriptor: what is checked is what is read.
    Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY)};
    if (f.fd < 0) throw_bad_input("cannot read " + what + " '" + path + "': " + std::strerror(errno));
    struct stat st {};
    if (::fstat(f.fd, &st) != 0) throw_bad_input("cannot read " + what + " '" + path + "': " + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) throw_bad_input(what + " '" + path + "' is a directory, expected a file");
    if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode) && !S_ISCHR(st.st_mode))
        throw_bad_input(what + " '" + path + "' is not a regular file");
    if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > limit)
        too_large(what, path, "is " + format_bytes(static_cast<uint64_t>(st.st_size)), limit);

    std::string text;
    if (S_ISREG(st.st_mode)) text.reserve(static_cast<size_t>(st.st_size));
    for (;;) {
        const size_t room = static_cast<size_t>(std::min<uint64_t>(kChunkBytes, limit + 1 - text.size()));
        const size_t old = text.size();
        text.resize(old + room);
        const ssize_t n = ::read(f.fd, text.data() + old, room);
        if (n < 0 && errno == EINTR) {
            text.resize(old);
            continue;
        }
        if (n < 0) throw_bad_input("cannot read " + what + " '" + path + "': " + std::strerror(errno));
        text.resize(old + static_cast<size_t>(n));
        if (n == 0) break;
        // A file that grew after the check, or a stream, is refused at the first byte past the limit.
        if (text.size() > limit) too_large(what, path, "holds more than " + format_bytes(limit), limit);
    }
    return text;
}

}  // namespace ipex
