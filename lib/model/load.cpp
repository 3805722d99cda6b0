#include "model/load.h"

#include <caffe2/serialize/inline_container.h>
#include <setjmp.h>
#include <signal.h>
#include <unistd.h>
#include <torch/csrc/jit/frontend/error_report.h>
#include <torch/csrc/jit/serialization/import.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <new>
#include <sstream>
#include <streambuf>

#include "base/atomic_file.h"
#include "base/bounded_file.h"
#include "base/errors.h"
#include "core/run_errors.h"
#include "base/json_io.h"
#include "ir/forward_arguments.h"
#include "model/zip_check.h"

namespace ipex::model {
namespace {
// The message of a TorchScript compiler error without its source excerpt. ErrorReport::what()
// renders the excerpt and, on code whose source ranges are damaged, throws from inside a
// noexcept function (std::terminate); the text streamed into the report is read instead,
// through an explicit specialization of the output operator the report befriends.
struct RawReportMessage {
    mutable std::string text;
};
}  // namespace
}  // namespace ipex::model

template <>
const torch::jit::ErrorReport &torch::jit::operator<<(const torch::jit::ErrorReport &e,
                                                     const ipex::model::RawReportMessage &out) {
    out.text = e.ss.str();
    return e;
}

namespace ipex::model {
namespace {

// While libtorch loads an archive, SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT (std::terminate)
// from inside it end the process as a bad input file with one line on stderr, or, in
// recovery mode, jump back to load_model. Handlers run on their own stack (a damaged file can
// make the compiler recurse until the stack overflows) and the previous ones come back after.
constexpr int kLoaderSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
bool g_recover = false;
int g_recovered = 0;
sigjmp_buf *g_jump = nullptr;
char g_crash_line[1024];
size_t g_crash_line_size = 0;
alignas(16) char g_alt_stack[1 << 16];

void on_loader_crash(int sig) {
    if (g_recover && g_jump) siglongjmp(*g_jump, sig);
    const ssize_t written = ::write(2, g_crash_line, g_crash_line_size);
    (void)written;
    ::_exit(static_cast<int>(ExitCode::bad_input));
}

std::string loader_crash_message(const std::string &path) {
    return "'" + path + "' cannot be loaded as TorchScript (damaged code: libtorch's loader crashed on it)";
}

class LoaderCrashGuard {
public:
    LoaderCrashGuard(const std::string &path, sigjmp_buf *jump) {
        const std::string line = "ipex-tool: error: " + loader_crash_message(path) + "\n";
        g_crash_line_size = std::min(line.size(), sizeof(g_crash_line));
        std::memcpy(g_crash_line, line.data(), g_crash_line_size);
        g_jump = jump;
        stack_t alt{};
        alt.ss_sp = g_alt_stack;
        alt.ss_size = sizeof(g_alt_stack);
        has_alt_ = ::sigaltstack(&alt, &old_alt_) == 0;
        struct sigaction sa {};
        sa.sa_handler = on_loader_crash;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_ONSTACK | SA_NODEFER;
        for (size_t i = 0; i < std::size(kLoaderSignals); ++i) ::sigaction(kLoaderSignals[i], &sa, &old_[i]);
    }
    ~LoaderCrashGuard() {
        for (size_t i = 0; i < std::size(kLoaderSignals); ++i) ::sigaction(kLoaderSignals[i], &old_[i], nullptr);
        if (has_alt_) ::sigaltstack(&old_alt_, nullptr);
        g_jump = nullptr;
    }
    LoaderCrashGuard(const LoaderCrashGuard &) = delete;
    LoaderCrashGuard &operator=(const LoaderCrashGuard &) = delete;

private:
    struct sigaction old_[std::size(kLoaderSignals)] {};
    stack_t old_alt_{};
    bool has_alt_ = false;
};

std::string compiler_message(const std::exception &e) {
    if (const auto *report = dynamic_cast<const torch::jit::ErrorReport *>(&e)) {
        RawReportMessage raw;
        *report << raw;
        return raw.text;
    }
    return e.what();
}

constexpr char kZipMagic[] = "PK\x03\x04";
constexpr unsigned char kPickleProto = 0x80;

std::string head_bytes(const std::string &path, size_t n) {
    std::ifstream in(path, std::ios::binary);
    std::string buf(n, '\0');
    in.read(&buf[0], static_cast<std::streamsize>(n));
    buf.resize(static_cast<size_t>(in.gcount()));
    return buf;
}

// Looks inside the zip for what kind of archive it is before handing it to the loader.
void classify_archive(const std::string &path) {
    std::vector<std::string> records;
    try {
        caffe2::serialize::PyTorchStreamReader reader(path);
        records = reader.getAllRecords();
    } catch (const c10::Error &e) {
        const std::string msg = e.what_without_backtrace();
        if (msg.find("archive does not contain any files") != std::string::npos ||
            msg.find("file in archive is not in a subdirectory") != std::string::npos)
            throw_bad_input("'" + path +
                            "' is a zip file but not a PyTorch archive; expected a "
                            "TorchScript model written by torch.jit.save");
        throw_bad_input("'" + path +
                        "' is a truncated or corrupt archive (the zip directory cannot be "
                        "read); re-export it with torch.jit.save");
    }
    bool has_code = false, has_data_pkl = false, has_constants = false;
    for (const auto &r : records) {
        if (r.rfind("code/", 0) == 0) has_code = true;
        if (r == "data.pkl") has_data_pkl = true;
        if (r == "constants.pkl") has_constants = true;
    }
    if (!has_code && has_data_pkl)
        throw_bad_input("'" + path +
                        "' is a Python pickle saved by torch.save (an nn.Module or tensors), "
                        "not TorchScript; export it with torch.jit.script(model) or "
                        "torch.jit.trace(model, example) and torch.jit.save");
    if (!has_code || !has_constants)
        throw_bad_input("'" + path +
                        "' is a PyTorch archive without TorchScript code; expected a model "
                        "written by torch.jit.save");
}

}  // namespace

void set_loader_crash_recovery(bool on) { g_recover = on; }

int loader_crashes_recovered() { return g_recovered; }

LoadedModel load_model(const std::string &path) {
    check_input_file(path, "model");
    const std::string head = head_bytes(path, 4);
    if (head.size() < 4 || std::memcmp(head.data(), kZipMagic, 4) != 0) {
        if (!head.empty() && static_cast<unsigned char>(head[0]) == kPickleProto)
            throw_bad_input("'" + path +
                            "' is a legacy Python pickle (torch.save), not TorchScript; "
                            "export it with torch.jit.script or torch.jit.trace and torch.jit.save");
        throw_bad_input("'" + path +
                        "' is not a TorchScript archive (no zip header); expected a file "
                        "written by torch.jit.save");
    }
    classify_archive(path);
    // Before libtorch reads it: its reader checks no CRC, and its TorchScript compiler is not
    // safe on damaged source (heap errors, not only exceptions).
    check_zip_records(path);

    LoadedModel out;
    out.path = path;
    torch::jit::ExtraFilesMap extra{{kMetadataFile, ""}};
    try {
        sigjmp_buf jump;
        LoaderCrashGuard guard(path, &jump);
        if (sigsetjmp(jump, 1) != 0) {
            ++g_recovered;
            throw_bad_input(loader_crash_message(path));
        }
        out.module = torch::jit::load(path, c10::Device(c10::kCPU), extra);
    } catch (const Error &) {
        throw;
    } catch (const std::bad_alloc &) {
        // A damaged length field asks the loader for more memory than there is.
        throw_bad_input("'" + path +
                        "' cannot be loaded as TorchScript: a size recorded in the archive asks for "
                        "more memory than this machine can give (a damaged file, or a model too big "
                        "for the memory available)");
    } catch (const std::exception &e) {
        // libtorch's errors, and the TorchScript compiler's (a std::runtime_error) for the code
        // records: an unknown operator or class is a model this build cannot run; anything else
        // a damaged file.
        const bool compiler = dynamic_cast<const c10::Error *>(&e) == nullptr;
        std::string msg = compiler ? compiler_message(e) : readable_error(e);
        msg.erase(0, msg.find_first_not_of("\n "));
        if (compiler) msg = msg.substr(0, msg.find('\n'));
        while (!msg.empty() && (msg.back() == ':' || msg.back() == ' ')) msg.pop_back();
        if (msg.find("Unknown builtin op") != std::string::npos || msg.find("Unknown type name") != std::string::npos)
            throw_unsupported("'" + path + "' uses an operator or class this build does not know: " + msg +
                              "; load the library that defines it");
        throw_bad_input("'" + path + "' cannot be loaded as TorchScript" + (compiler ? " (damaged code)" : "") +
                        ": " + msg);
    }
    if (!extra[kMetadataFile].empty()) {
        try {
            out.metadata = parse_json(extra[kMetadataFile], path + " (" + kMetadataFile + ")");
        } catch (const Error &) {
            out.metadata.reset();  // foreign, damaged or too deeply nested record: treat as a plain model
        }
    }
    out.bytes = file_size(path);
    if (!out.module.find_method("forward"))
        throw_unsupported("'" + path + "' has no forward method; ipex-tool works on forward");
    return out;
}

namespace {

// An ostream buffer writing straight through an OutputFile, so a model is serialized into its
// file record by record, never whole in memory (a 5 GB recommendation model would need two
// more copies). The first write error is kept and the rest of the bytes are dropped, the stream
// still reporting success: torch 1.13's writer, told of a failed write, throws and then throws
// again from its destructor (std::terminate). save_model rethrows the error once the serializer
// is done (exit 2).
class OutputFileBuf : public std::streambuf {
public:
    explicit OutputFileBuf(OutputFile &out) : out_(out) {}
    std::exception_ptr error() const { return error_; }

protected:
    std::streamsize xsputn(const char *data, std::streamsize n) override {
        if (error_) return n;
        try {
            out_.write(data, static_cast<size_t>(n));
        } catch (...) {
            error_ = std::current_exception();
        }
        return n;
    }
    int_type overflow(int_type c) override {
        if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
        const char ch = traits_type::to_char_type(c);
        return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
    }

private:
    OutputFile &out_;
    std::exception_ptr error_;
};

}  // namespace

void save_model(const torch::jit::Module &module, const std::string &dst,
                const std::optional<nlohmann::json> &metadata) {
    torch::jit::ExtraFilesMap extra;
    if (metadata) extra[kMetadataFile] = metadata->dump(2);
    write_atomically(dst, [&](const std::string &tmp) {
        OutputFile out(tmp, dst);
        OutputFileBuf buffer(out);
        std::ostream stream(&buffer);
        // A file that cannot be written is the one write error (exit 2) every output has; a
        // model that cannot be serialized is an internal error.
        try {
            module.save(stream, extra);
        } catch (const c10::Error &e) {
            if (buffer.error()) std::rethrow_exception(buffer.error());
            throw Error(ExitCode::internal, "serializing the model for '" + dst + "' failed: " + readable_error(e));
        }
        if (buffer.error()) std::rethrow_exception(buffer.error());
        out.close();
    });
}

std::vector<std::string> recorded_sample_inputs(const LoadedModel &model) {
    std::vector<std::string> specs;
    if (!model.metadata || !model.metadata->contains("sample_inputs") ||
        !(*model.metadata)["sample_inputs"].is_string())
        return specs;
    std::stringstream ss((*model.metadata)["sample_inputs"].get<std::string>());
    std::string item;
    while (std::getline(ss, item, ','))
        if (!item.empty()) specs.push_back(item);
    return specs;
}

c10::IValue run_forward(torch::jit::Module &module, const std::vector<c10::IValue> &inputs,
                        const std::string &what) {
    c10::InferenceMode guard;
    try {
        return module.forward(ir::forward_arguments(module, inputs));
    } catch (const Error &) {
        throw;
    } catch (const std::exception &e) {  // our ops', libtorch's, or raised by the model's own code
        rethrow_run_error(e, what + " rejected the inputs: ", " (check --input/--sample-input shapes and dtypes)");
    }
}

}  // namespace ipex::model
