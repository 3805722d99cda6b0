#include "commands/import_gguf.h"

#include <ATen/ATen.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "base/atomic_file.h"
#include "base/errors.h"
#include "checkpoint/gguf.h"
#include "checkpoint/safetensors.h"
#include "llm/config.h"
#include "llm/gguf_tokenizer.h"
#include "llm/tensor_source.h"

namespace ipex::commands {
namespace {

namespace fs = std::filesystem;

// What one output shard holds at most before the next begins (the tensors of a shard are in
// memory together while it is written).
constexpr uint64_t kShardBytes = uint64_t(2) << 30;

// Whether `dir` exists, and whether it holds anything.
bool exists(const std::string &dir) {
    struct stat st {};
    return ::lstat(dir.c_str(), &st) == 0;
}
bool non_empty_dir(const std::string &dir) {
    std::error_code ec;
    return fs::is_directory(dir, ec) && !fs::is_empty(dir, ec);
}

// Refuses an OUT_DIR that is not a directory, or one that holds files without --force (exit 2).
void check_out_dir(const ImportGgufRequest &r) {
    if (r.out.empty()) throw_usage("give OUT_DIR");
    std::error_code ec;
    if (exists(r.out) && !fs::is_directory(r.out, ec))
        throw_usage("'" + r.out + "' exists and is not a directory: give a new or empty directory for OUT_DIR");
    if (non_empty_dir(r.out) && !r.force)
        throw_usage("'" + r.out + "' is not empty: give a new or empty directory, or --force to replace it");
    const fs::path parent = fs::absolute(fs::path(r.out)).lexically_normal().parent_path();
    if (!fs::is_directory(parent, ec)) throw_usage("the directory of '" + r.out + "' does not exist");
}

// A fresh directory beside OUT_DIR (so the final rename stays on one file system).
std::string temp_dir_beside(const std::string &out) {
    fs::path p = fs::absolute(fs::path(out)).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();
    std::string pattern = (p.parent_path() / ("." + p.filename().string() + ".tmp-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) throw_write_failed(out, std::strerror(errno));
    const mode_t mask = ::umask(0);  // mkdtemp makes it 0700: give it mkdir's usual mode
    ::umask(mask);
    ::chmod(pattern.c_str(), 0777 & ~mask);
    return pattern;
}

// Moves the finished directory onto OUT_DIR: an empty one is replaced by rename, a full one
// (--force) is moved aside first and removed once the new one is in place.
void move_into_place(const std::string &tmp, const std::string &out) {
    std::string aside;
    if (non_empty_dir(out)) {
        aside = temp_dir_beside(out);
        fs::remove(aside);
        if (::rename(out.c_str(), aside.c_str()) != 0) throw_write_failed(out, std::strerror(errno));
    } else if (exists(out) && ::rmdir(out.c_str()) != 0) {
        throw_write_failed(out, std::strerror(errno));
    }
    if (::rename(tmp.c_str(), out.c_str()) != 0) {
        const std::string reason = std::strerror(errno);
        if (!aside.empty()) ::rename(aside.c_str(), out.c_str());
        throw_write_failed(out, reason);
    }
    std::error_code ec;
    if (!aside.empty()) fs::remove_all(aside, ec);
}

void write_json(const std::string &path, const nlohmann::json &j) { write_text_atomically(path, j.dump(2) + "\n"); }

// The tensors in HF names written as safetensors shards of at most kShardBytes (one file
// model.safetensors when they fit). Returns {files, bytes}.
std::pair<int64_t, uint64_t> write_weights(const llm::TensorSource &src, const std::vector<std::string> &names,
                                           at::ScalarType dtype, const std::string &dir) {
    const uint64_t elem = dtype == at::kBFloat16 ? 2 : 4;
    std::vector<std::vector<std::string>> shards(1);
    uint64_t in_shard = 0, total = 0;
    for (const auto &n : names) {
        uint64_t bytes = elem;
        for (int64_t d : src.shape(n)) bytes *= static_cast<uint64_t>(d);
        if (in_shard > 0 && in_shard + bytes > kShardBytes) {
            shards.emplace_back();
            in_shard = 0;
        }
        shards.back().push_back(n);
        in_shard += bytes;
        total += bytes;
    }
    const auto file_name = [&](size_t i) {
        if (shards.size() == 1) return std::string("model.safetensors");
        char name[64];
        std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
        return std::string(name);
    };
    nlohmann::json weight_map = nlohmann::json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
        std::vector<std::pair<std::string, at::Tensor>> tensors;
        for (const auto &n : shards[i]) {
            if (!src.readable(n))
                throw_unsupported("GGUF tensor of '" + n + "' has type " + src.dtype(n) + ", which is not read");
            tensors.emplace_back(n, src.tensor(n).to(dtype).contiguous());
            weight_map[n] = file_name(i);
        }
        woq::write_safetensors(dir + "/" + file_name(i), tensors, {{"format", "pt"}});
    }
    if (shards.size() > 1)
        write_json(dir + "/model.safetensors.index.json", {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}});
    return {static_cast<int64_t>(shards.size()), total};
}

}  // namespace

std::string ImportGgufReport::text() const {
    std::ostringstream o;
    o << "imported " << summary["tensors"].get<int64_t>() << " tensors from " << summary["checkpoint"].get<std::string>()
      << "\n"
      << "  architecture " << summary["architecture"].get<std::string>() << "\n"
      << "  dtype        " << summary["dtype"].get<std::string>() << "\n"
      << "  tokenizer    " << (summary["tokenizer"].is_null() ? std::string("none (") + summary["tokenizer_note"].get<std::string>() + ")"
                                                              : summary["tokenizer"].get<std::string>())
      << "\n"
      << "  files        " << summary["files"].size() << " in " << summary["output"].get<std::string>() << "\n";
    return o.str();
}

ImportGgufReport run_import_gguf(const ImportGgufRequest &r) {
    if (r.dtype != "fp32" && r.dtype != "bf16") throw_usage("--dtype must be fp32 or bf16");
    check_out_dir(r);
    check_input_file(r.checkpoint, "GGUF file");
    if (!llm::is_gguf(r.checkpoint))
        throw_bad_input("'" + r.checkpoint + "' is not a GGUF file (it does not start with the magic \"GGUF\")");
    // Everything is read and checked before anything is written.
    const woq::GgufFile file(r.checkpoint);
    nlohmann::json config = llm::gguf_config(r.checkpoint);
    const llm::ModelConfig parsed = llm::parse_config(config.dump(), r.checkpoint + " (GGUF metadata)");
    const std::vector<std::string> names = llm::gguf_tensor_names(r.checkpoint);
    nlohmann::json tokenizer, tokenizer_config = llm::gguf_tokenizer_config(file.metadata(), r.checkpoint);
    std::string tokenizer_note;
    try {
        tokenizer = llm::gguf_tokenizer_json(file.metadata(), r.checkpoint);
        tokenizer.dump();  // a token that is not UTF-8 throws here
    } catch (const Error &e) {
        if (e.code() != ExitCode::unsupported) throw;
        tokenizer = nullptr;
        tokenizer_note = e.what();
    } catch (const nlohmann::json::exception &) {
        throw_bad_input("GGUF file '" + r.checkpoint + "': its tokenizer holds a token that is not UTF-8 text");
    }
    const auto source = llm::gguf_source(r.checkpoint);
    const at::ScalarType dtype = r.dtype == "bf16" ? at::kBFloat16 : at::kFloat;
    config["torch_dtype"] = r.dtype == "bf16" ? "bfloat16" : "float32";

    const std::string tmp = temp_dir_beside(r.out);
    nlohmann::json files = nlohmann::json::array();
    int64_t shards = 0;
    uint64_t bytes = 0;
    try {
        std::tie(shards, bytes) = write_weights(*source, names, dtype, tmp);
        write_json(tmp + "/config.json", config);
        nlohmann::json generation = nlohmann::json::object();
        if (parsed.bos_token_id >= 0) generation["bos_token_id"] = parsed.bos_token_id;
        if (!parsed.eos_token_ids.empty()) generation["eos_token_id"] = parsed.eos_token_ids;
        write_json(tmp + "/generation_config.json", generation);
        if (!tokenizer.is_null()) write_json(tmp + "/tokenizer.json", tokenizer);
        write_json(tmp + "/tokenizer_config.json", tokenizer_config);
        for (const auto &entry : fs::directory_iterator(tmp)) files.push_back(entry.path().filename().string());
        move_into_place(tmp, r.out);
    } catch (...) {
        std::error_code ec;
        fs::remove_all(tmp, ec);
        throw;
    }
    std::sort(files.begin(), files.end());
    nlohmann::json summary = {{"checkpoint", r.checkpoint},
                              {"output", r.out},
                              {"architecture", config["architectures"][0]},
                              {"dtype", r.dtype},
                              {"tensors", static_cast<int64_t>(names.size())},
                              {"shards", shards},
                              {"bytes_out", bytes},
                              {"tokenizer", tokenizer.is_null() ? nlohmann::json() : nlohmann::json(file.metadata().value(
                                                                    "tokenizer.ggml.model", std::string()))},
                              {"chat_template", tokenizer_config.contains("chat_template")},
                              {"files", files}};
    if (!tokenizer_note.empty()) summary["tokenizer_note"] = tokenizer_note;
    return {summary};
}

}  // namespace ipex::commands
