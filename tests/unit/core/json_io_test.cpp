#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "base/bounded_file.h"
#include "base/errors.h"
#include "base/json_io.h"
#include "unit/test_errors.h"

namespace fs = std::filesystem;
using ipex::ExitCode;
using ipex::testing::code_of;

namespace {

struct TempDir {
    fs::path path = fs::temp_directory_path() / ("ipex-json-io-" + std::to_string(::getpid()));
    TempDir() { fs::create_directories(path); }
    ~TempDir() { fs::remove_all(path); }
};

// {"a":{"a":...1...}} nested `levels` objects deep.
std::string nested_objects(int levels) {
    std::string s;
    for (int i = 0; i < levels; ++i) s += "{\"a\":";
    s += "1";
    s.append(static_cast<size_t>(levels), '}');
    return s;
}

std::string message_of(const std::function<void()> &fn) {
    try {
        fn();
    } catch (const ipex::Error &e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(JsonIo, DepthCountsObjectsAndArraysNotStrings) {
    EXPECT_EQ(ipex::json_depth("1"), 0);
    EXPECT_EQ(ipex::json_depth("{}"), 1);
    EXPECT_EQ(ipex::json_depth(R"({"a":[1,{"b":[]}],"c":{}})"), 4);
    // Brackets and escaped quotes inside strings are text.
    EXPECT_EQ(ipex::json_depth(R"({"a":"[[[{{{","b":"\"[[[\\"})"), 1);
    EXPECT_EQ(ipex::json_depth(nested_objects(100000)), 100000);
}

TEST(JsonIo, ParseRefusesDeepNestingBeforeParsing) {
    EXPECT_NO_THROW(ipex::parse_json(nested_objects(ipex::kMaxJsonDepth), "ok.json"));
    const std::string deep = nested_objects(100000);
    EXPECT_EQ(code_of([&] { ipex::parse_json(deep, "config.json"); }), ExitCode::bad_input);
    const std::string msg = message_of([&] { ipex::parse_json(deep, "config.json"); });
    EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("100000 levels"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(ipex::kMaxJsonDepth)), std::string::npos) << msg;
    std::string arrays(ipex::kMaxJsonDepth + 1, '[');
    arrays.append(ipex::kMaxJsonDepth + 1, ']');
    EXPECT_EQ(code_of([&] { ipex::parse_json(arrays, "a.json"); }), ExitCode::bad_input);
}

TEST(JsonIo, ParseErrorsAreBadInputNamingTheSource) {
    EXPECT_EQ(code_of([] { ipex::parse_json("{", "x.json"); }), ExitCode::bad_input);
    EXPECT_EQ(code_of([] { ipex::parse_json_object("[1]", "x.json"); }), ExitCode::bad_input);
    const std::string msg = message_of([] { ipex::parse_json_object("[1]", "x.json", "fix it"); });
    EXPECT_NE(msg.find("'x.json' is not a JSON object (it holds an array); fix it"), std::string::npos) << msg;
}

TEST(JsonIo, ReaderChecksEveryType) {
    const nlohmann::json j = nlohmann::json::parse(
        R"({"s":"x","i":3,"f":1.5,"b":true,"n":null,"o":{"k":"yes"},"a":[1],"big":18446744073709551615})");
    const ipex::JsonReader r(j, "meta.json", "layers[2]");
    EXPECT_EQ(r.str("s"), "x");
    EXPECT_EQ(r.integer("i", 0, 3), 3);
    EXPECT_EQ(r.number("f"), 1.5);
    EXPECT_TRUE(r.boolean("b"));
    EXPECT_FALSE(r.has("n"));
    EXPECT_EQ(r.integer_or("n", 7), 7);
    EXPECT_FALSE(r.boolean_or("missing", false));
    EXPECT_EQ(r.array("a").size(), 1u);
    // Wrong types, ranges and missing fields: exit 3 naming the file and the field's path.
    const std::string msg = message_of([&] { r.object("o").boolean("k"); });
    EXPECT_NE(msg.find("meta.json: layers[2].o.k must be true or false (got a string)"), std::string::npos) << msg;
    EXPECT_EQ(code_of([&] { r.boolean_or("s", false); }), ExitCode::bad_input);
    EXPECT_EQ(code_of([&] { r.integer("f"); }), ExitCode::bad_input);
    EXPECT_EQ(code_of([&] { r.integer("i", 4, 9); }), ExitCode::bad_input);
    EXPECT_EQ(code_of([&] { r.integer("big"); }), ExitCode::bad_input);
    EXPECT_EQ(code_of([&] { r.str("n"); }), ExitCode::bad_input);
    EXPECT_EQ(code_of([&] { r.object("a"); }), ExitCode::bad_input);
    EXPECT_EQ(code_of([&] { ipex::JsonReader(j["a"], "meta.json"); }), ExitCode::bad_input);
}

TEST(BoundedFile, FormatsSizes) {
    EXPECT_EQ(ipex::format_bytes(512), "512 B");
    EXPECT_EQ(ipex::format_bytes(uint64_t(64) << 20), "64 MiB");
    EXPECT_EQ(ipex::format_bytes(uint64_t(5) << 30), "5 GiB");
    EXPECT_EQ(ipex::format_bytes(uint64_t(5000000000)), "4.7 GiB");
}

TEST(BoundedFile, ChecksTheSizeBeforeReading) {
    TempDir dir;
    const fs::path small = dir.path / "config.json";
    std::ofstream(small) << "{}";
    EXPECT_EQ(ipex::read_bounded_file(small.string(), 2, "config"), "{}");
    EXPECT_EQ(code_of([&] { ipex::read_bounded_file(small.string(), 1, "config"); }), ExitCode::bad_input);
    // A 5 GB sparse file: refused from its size, nothing read (this would take seconds and
    // gigabytes otherwise).
    const fs::path huge = dir.path / "model.safetensors.index.json";
    std::ofstream(huge).close();
    fs::resize_file(huge, uint64_t(5) << 30);
    const std::string msg =
        message_of([&] { ipex::read_bounded_file(huge.string(), uint64_t(64) << 20, "checkpoint index"); });
    EXPECT_NE(msg.find(huge.string()), std::string::npos) << msg;
    EXPECT_NE(msg.find("is 5 GiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("at most 64 MiB"), std::string::npos) << msg;
    EXPECT_EQ(code_of([&] { ipex::read_bounded_file(dir.path.string(), 10, "config"); }), ExitCode::bad_input);
    EXPECT_EQ(code_of([&] { ipex::read_bounded_file((dir.path / "none").string(), 10, "config"); }),
              ExitCode::bad_input);
}

TEST(BoundedFile, StopsAStreamAtTheLimit) {
    TempDir dir;
    const fs::path fifo = dir.path / "fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    // The reader closes the FIFO at the limit; the writer's next write must fail, not kill us.
    const auto old_pipe = std::signal(SIGPIPE, SIG_IGN);
    std::thread writer([&] {
        std::ofstream out(fifo, std::ios::binary);
        const std::string block(4096, 'x');
        // Far more than the limit; the reader stops and closes, so the writer gets EPIPE-like
        // failures, which an ofstream swallows.
        for (int i = 0; i < 64 && out; ++i) out << block;
    });
    const ExitCode code = code_of([&] { ipex::read_bounded_file(fifo.string(), 10000, "prompt file"); });
    writer.join();
    std::signal(SIGPIPE, old_pipe);
    EXPECT_EQ(code, ExitCode::bad_input);
}
