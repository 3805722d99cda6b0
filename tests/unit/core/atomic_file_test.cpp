#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/errors.h"
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
