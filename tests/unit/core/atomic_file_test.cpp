#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/atomic_file.h"
#include "base/errors.h"
#include "unit/test_errors.h"

namespace fs = std::filesystem;
using ipex::testing::code_of;

namespace {

struct TempDir {
    fs::path path = fs::temp_directory_path() / ("ipex-atomic-" + std::to_string(::getpid()));
    TempDir() { fs::create_directories(path); }
    ~TempDir() { fs::remove_all(path); }
    size_t entries() const { return static_cast<size_t>(std::distance(fs::directory_iterator(path), {})); }
};

}  // namespace

TEST(AtomicFile, WritesThroughTemporaryAndRenames) {
    TempDir dir;
    const fs::path dst = dir.path / "out.txt";
    ipex::write_text_atomically(dst.string(), "hello\n");
    std::ifstream in(dst);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, "hello\n");
    EXPECT_EQ(dir.entries(), 1u);
}

TEST(AtomicFile, FailedWriterLeavesNothingAndKeepsOldFile) {
    TempDir dir;
    const fs::path dst = dir.path / "out.bin";
    std::ofstream(dst) << "old";
    EXPECT_THROW(ipex::write_atomically(dst.string(),
                                        [](const std::string &tmp) {
                                            std::ofstream(tmp) << "half";
                                            throw std::runtime_error("boom");
                                        }),
                 std::runtime_error);
    std::ifstream in(dst);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, "old");
    EXPECT_EQ(dir.entries(), 1u);
}

TEST(AtomicFile, ChecksOutputPaths) {
    TempDir dir;
    const fs::path in = dir.path / "in.pt";
    std::ofstream(in) << "x";
    EXPECT_EQ(code_of([&] { ipex::check_output_path((dir.path / "no/such/out.pt").string(), {}); }),
              ipex::ExitCode::usage);
    EXPECT_EQ(code_of([&] { ipex::check_output_path(in.string(), {in.string()}); }), ipex::ExitCode::usage);
    // The same file through another spelling of the path is still the input.
    EXPECT_EQ(code_of([&] { ipex::check_output_path((dir.path / "." / "in.pt").string(), {in.string()}); }),
              ipex::ExitCode::usage);
    EXPECT_EQ(code_of([&] { ipex::check_output_path(dir.path.string(), {}); }), ipex::ExitCode::usage);
    EXPECT_EQ(code_of([&] { ipex::check_output_path((dir.path / "new.pt").string(), {in.string()}); }),
              ipex::ExitCode::ok);
}

TEST(AtomicFile, ChecksInputFiles) {
    TempDir dir;
    std::ofstream(dir.path / "empty.pt").close();
    EXPECT_EQ(code_of([&] { ipex::check_input_file((dir.path / "missing.pt").string(), "model"); }),
              ipex::ExitCode::bad_input);
    EXPECT_EQ(code_of([&] { ipex::check_input_file((dir.path / "empty.pt").string(), "model"); }),
              ipex::ExitCode::bad_input);
    EXPECT_EQ(code_of([&] { ipex::check_input_file(dir.path.string(), "model"); }), ipex::ExitCode::bad_input);
}

namespace {

std::string read_all(const fs::path &p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

// A character device named as an output (a copy of /dev/null, as a CI job running as root might
// pass /dev/null) is written in place, never renamed over, and survives a failed writer.
TEST(AtomicFile, WritesACharacterDeviceInPlace) {
    TempDir dir;
    const fs::path dev = dir.path / "null";
    if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0)
        GTEST_SKIP() << "mknod needs root (CAP_MKNOD) here: " << std::strerror(errno);
    EXPECT_EQ(ipex::output_target(dev.string()), ipex::OutputTarget::in_place);
    EXPECT_EQ(code_of([&] { ipex::check_output_path(dev.string(), {}); }), ipex::ExitCode::ok);
    ipex::write_text_atomically(dev.string(), "report\n");
    EXPECT_THROW(ipex::write_atomically(dev.string(), [](const std::string &) { throw std::runtime_error("boom"); }),
                 std::runtime_error);
    struct stat st {};
    ASSERT_EQ(::lstat(dev.c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
    EXPECT_EQ(dir.entries(), 1u);  // no temporary file left beside it
}

// /dev/full takes the write in place and its failure is exit 2, the device untouched.
TEST(AtomicFile, AFullDeviceIsACannotWriteError) {
    struct stat st {};
    if (::stat("/dev/full", &st) != 0) GTEST_SKIP() << "no /dev/full here";
    EXPECT_EQ(code_of([] { ipex::write_text_atomically("/dev/full", "x"); }), ipex::ExitCode::usage);
    ASSERT_EQ(::stat("/dev/full", &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(AtomicFile, WritesAFifoInPlace) {
    TempDir dir;
    const fs::path fifo = dir.path / "fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    std::string got;
    std::thread reader([&] { got = read_all(fifo); });
    ipex::write_text_atomically(fifo.string(), "through the pipe\n");
    reader.join();
    EXPECT_EQ(got, "through the pipe\n");
    struct stat st {};
    ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

// A link to a regular file stays a link; the file it names gets the new content.
TEST(AtomicFile, KeepsASymbolicLinkAndReplacesItsFile) {
    TempDir dir;
    const fs::path target = dir.path / "real.json", link = dir.path / "link.json";
    std::ofstream(target) << "old";
    fs::create_symlink(target, link);
    ipex::write_text_atomically(link.string(), "new");
    EXPECT_TRUE(fs::is_symlink(link));
    EXPECT_EQ(read_all(target), "new");
}

TEST(AtomicFile, RefusesSocketsAndDirectories) {
    TempDir dir;
    const fs::path sock = dir.path / "s.sock";
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, sock.c_str(), sizeof(addr.sun_path) - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(ipex::output_target(sock.string()), ipex::OutputTarget::refused);
    EXPECT_EQ(code_of([&] { ipex::write_text_atomically(sock.string(), "x"); }), ipex::ExitCode::usage);
    EXPECT_EQ(code_of([&] { ipex::write_text_atomically(dir.path.string(), "x"); }), ipex::ExitCode::usage);
    ::close(fd);
    struct stat st {};
    ASSERT_EQ(::lstat(sock.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
}
