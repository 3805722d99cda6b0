#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <torch/script.h>

#include <filesystem>
#include <fstream>

#include "base/errors.h"
#include "core/run_errors.h"
#include "model/load.h"

namespace fs = std::filesystem;

namespace {

struct TempDir {
    fs::path path = fs::temp_directory_path() / ("ipex-load-" + std::to_string(::getpid()));
    TempDir() { fs::create_directories(path); }
    ~TempDir() { fs::remove_all(path); }
};

torch::jit::Module small_module() {
    torch::jit::Module m("Scale");
    m.register_parameter("w", torch::full({3}, 2.0), false);
    m.define("def forward(self, x):\n    return x * self.w\n");
    return m;
}

std::string error_of(const std::string &path, ipex::ExitCode expected) {
    try {
        ipex::model::load_model(path);
    } catch (const ipex::Error &e) {
        EXPECT_EQ(e.code(), expected) << e.what();
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << "message names the file: " << e.what();
        return e.what();
    }
    ADD_FAILURE() << "expected an error for " << path;
    return "";
}

}  // namespace

TEST(LoadModel, RoundTripsWithMetadata) {
    TempDir dir;
    const std::string path = (dir.path / "m.pt").string();
    ipex::model::save_model(small_module(), path, nlohmann::json{{"dtype", "bf16"}});
    auto loaded = ipex::model::load_model(path);
    ASSERT_TRUE(loaded.metadata);
    EXPECT_EQ((*loaded.metadata)["dtype"], "bf16");
    auto out = loaded.module.forward({torch::ones({3})}).toTensor();
    EXPECT_TRUE(torch::allclose(out, torch::full({3}, 2.0)));
    EXPECT_GT(loaded.bytes, 0u);
}

// The model is serialized straight into its file: a device that takes no byte is the one write
// error (exit 2, the system's reason), not a crash of torch's writer, and a directory that
// cannot hold the file keeps nothing behind.
TEST(SaveModel, WriteFailureIsExitTwo) {
    if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
    try {
        ipex::model::save_model(small_module(), "/dev/full", nlohmann::json{{"dtype", "fp32"}});
        ADD_FAILURE() << "saving to /dev/full succeeded";
    } catch (const ipex::Error &e) {
        EXPECT_EQ(e.code(), ipex::ExitCode::usage);
        EXPECT_NE(std::string(e.what()).find("cannot write '/dev/full'"), std::string::npos) << e.what();
    }
    TempDir dir;
    const fs::path target = dir.path / "m.pt";
    ipex::model::save_model(small_module(), target.string(), std::nullopt);
    EXPECT_TRUE(ipex::model::load_model(target.string()).module.find_method("forward"));
    EXPECT_EQ(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()), 1);  // no temporary left
}

TEST(LoadModel, ExplainsBadFiles) {
    TempDir dir;
    const fs::path good = dir.path / "good.pt";
    small_module().save(good.string());

    error_of((dir.path / "missing.pt").string(), ipex::ExitCode::bad_input);
    error_of(dir.path.string(), ipex::ExitCode::bad_input);
    std::ofstream(dir.path / "empty.pt").close();
    EXPECT_NE(error_of((dir.path / "empty.pt").string(), ipex::ExitCode::bad_input).find("empty"), std::string::npos);
    std::ofstream(dir.path / "text.pt") << "definitely not a model";
    EXPECT_NE(error_of((dir.path / "text.pt").string(), ipex::ExitCode::bad_input).find("not a TorchScript"),
              std::string::npos);
    std::ofstream(dir.path / "legacy.pt") << "\x80\x02}q\x00.";
    EXPECT_NE(error_of((dir.path / "legacy.pt").string(), ipex::ExitCode::bad_input).find("pickle"),
              std::string::npos);

    // A zip holding only data.pkl is what torch.save(module) writes.
    {
        caffe2::serialize::PyTorchStreamWriter writer((dir.path / "pickled.pt").string());
        const std::string pkl = "\x80\x02}q\x00.";
        writer.writeRecord("data.pkl", pkl.data(), pkl.size());
        writer.writeEndOfFile();
    }
    EXPECT_NE(error_of((dir.path / "pickled.pt").string(), ipex::ExitCode::bad_input).find("torch.jit.script"),
              std::string::npos);

    // The first half of a valid archive.
    const auto size = fs::file_size(good);
    std::ifstream in(good, std::ios::binary);
    std::string bytes(size / 2, '\0');
    in.read(&bytes[0], static_cast<std::streamsize>(bytes.size()));
    std::ofstream(dir.path / "truncated.pt", std::ios::binary) << bytes;
    EXPECT_NE(error_of((dir.path / "truncated.pt").string(), ipex::ExitCode::bad_input).find("truncated"),
              std::string::npos);
}

TEST(LoadModel, RelaysModelErrorsReadably) {
    auto m = small_module();
    try {
        ipex::model::run_forward(m, {torch::ones({4})}, "'m.pt'");
        FAIL() << "expected the model's own error";
    } catch (const ipex::Error &e) {
        EXPECT_EQ(e.code(), ipex::ExitCode::bad_input);
        const std::string msg = e.what();
        EXPECT_NE(msg.find("'m.pt' rejected the inputs"), std::string::npos) << msg;
        EXPECT_EQ(msg.find("Exception raised from"), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
}

// Errors raised deep inside the TorchScript interpreter come with a TorchScript traceback;
// the message keeps only the cause, on one line.
TEST(LoadModel, RelaysInterpreterErrorsByTheirCause) {
    torch::jit::Module m("Deep");
    m.define(R"(
def flatten(self, x):
    return x.view(3, -1)

def check(self, x):
    assert x.dim() == 2, "expects a 2-d batch"
    return x

def forward(self, x):
    return self.flatten(self.check(x))
)");
    const std::vector<std::pair<at::Tensor, std::string>> cases = {
        {torch::ones({4}), "expects a 2-d batch"},
        {torch::ones({2, 5}), "shape '[3, -1]' is invalid for input of size 10"},
    };
    for (const auto &[input, cause] : cases) {
        try {
            ipex::model::run_forward(m, {input}, "'deep.pt'");
            ADD_FAILURE() << "expected an error for " << cause;
        } catch (const ipex::Error &e) {
            EXPECT_EQ(e.code(), ipex::ExitCode::bad_input);
            const std::string msg = e.what();
            EXPECT_NE(msg.find("'deep.pt' rejected the inputs: "), std::string::npos) << msg;
            EXPECT_NE(msg.find(cause), std::string::npos) << msg;
            EXPECT_EQ(msg.find("Traceback"), std::string::npos) << msg;
            EXPECT_EQ(msg.find("Exception raised from"), std::string::npos) << msg;
            EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
        }
    }
    // Errors that are neither libtorch's nor the interpreter's keep their first lines.
    EXPECT_EQ(ipex::readable_error(std::runtime_error("first\nsecond\n")), "first | second");
    const c10::Error torch_error("shape mismatch", "frame #0: somewhere");
    EXPECT_EQ(ipex::readable_error(static_cast<const std::exception &>(torch_error)), "shape mismatch");
}
