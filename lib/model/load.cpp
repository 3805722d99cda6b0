#include "model/load.h"

#include <caffe2/serialize/inline_container.h>
#include <sys/stat.h>
#include <torch/csrc/jit/serialization/import.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/errors.h"

namespace ipex::model {
namespace {

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

    LoadedModel out;
    out.path = path;
    torch::jit::ExtraFilesMap extra{{kMetadataFile, ""}};
    try {
        out.module = torch::jit::load(path, c10::Device(c10::kCPU), extra);
    } catch (const c10::Error &e) {
        const std::string msg = readable_error(e);
        if (msg.find("Unknown builtin op") != std::string::npos ||
            msg.find("Unknown type name") != std::string::npos)
            throw_unsupported("'" + path + "' uses an operator or class this build does not know: " +
                              msg + "; load the library that defines it");
        throw_bad_input("'" + path + "' cannot be loaded as TorchScript: " + msg);
    } catch (const std::exception &e) {
        // The TorchScript parser reports damaged code records as std::runtime_error.
        std::string msg = e.what();
        if (auto nl = msg.find('\n'); nl != std::string::npos) msg = msg.substr(0, nl);
        throw_bad_input("'" + path + "' cannot be loaded as TorchScript (damaged code): " + msg);
    }
    if (!extra[kMetadataFile].empty()) {
        try {
            out.metadata = nlohmann::json::parse(extra[kMetadataFile]);
        } catch (const nlohmann::json::exception &) {
            out.metadata.reset();  // foreign or damaged record: treat as a plain model
        }
    }
    struct stat st {};
    if (stat(path.c_str(), &st) == 0) out.bytes = static_cast<uint64_t>(st.st_size);
    if (!out.module.find_method("forward"))
        throw_unsupported("'" + path + "' has no forward method; ipex-tool works on forward");
    return out;
}

void save_model(const torch::jit::Module &module, const std::string &dst,
                const std::optional<nlohmann::json> &metadata) {
    torch::jit::ExtraFilesMap extra;
    if (metadata) extra[kMetadataFile] = metadata->dump(2);
    write_atomically(dst, [&](const std::string &tmp) {
        try {
            module.save(tmp, extra);
        } catch (const c10::Error &e) {
            throw Error(ExitCode::internal, "saving '" + dst + "' failed: " + readable_error(e));
        }
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
        return module.forward(inputs);
    } catch (const Error &) {
        throw;
    } catch (const std::exception &e) {  // libtorch's, the interpreter's, or raised by the model's own code
        throw_bad_input(what + " rejected the inputs: " + readable_error(e) +
                        " (check --input/--sample-input shapes and dtypes)");
    }
}

}  // namespace ipex::model
