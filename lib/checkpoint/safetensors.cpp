#include "checkpoint/safetensors.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/atomic_file.h"
#include "base/bounded_file.h"
#include "base/errors.h"
#include "base/json_io.h"

namespace ipex::woq {
namespace {

struct DtypeEntry {
    const char *name;
    size_t size;
    at::ScalarType type;
};

// The dtypes of the safetensors format; those libtorch 1.13 has no type for are Undefined.
constexpr DtypeEntry kDtypes[] = {
    {"BOOL", 1, at::kBool},   {"U8", 1, at::kByte},     {"I8", 1, at::kChar},
    {"I16", 2, at::kShort},   {"U16", 2, at::ScalarType::Undefined},
    {"F16", 2, at::kHalf},    {"BF16", 2, at::kBFloat16}, {"I32", 4, at::kInt},
    {"U32", 4, at::ScalarType::Undefined}, {"F32", 4, at::kFloat},
    {"F64", 8, at::kDouble},  {"I64", 8, at::kLong},    {"U64", 8, at::ScalarType::Undefined},
    {"F8_E4M3", 1, at::ScalarType::Undefined}, {"F8_E5M2", 1, at::ScalarType::Undefined},
};

const DtypeEntry *find_dtype(const std::string &name) {
    for (const auto &d : kDtypes)
        if (name == d.name) return &d;
    return nullptr;
}

const char *dtype_name(at::ScalarType type) {
    for (const auto &d : kDtypes)
        if (d.type == type) return d.name;
    return nullptr;
}

[[noreturn]] void fail(const std::string &name, const std::string &what) {
    throw_bad_input("'" + name + "' is not a valid safetensors file: " + what +
                    " (re-export the checkpoint or check the download)");
}

uint64_t read_u64_le(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

TensorInfo parse_entry(const std::string &tensor, const nlohmann::json &j, const std::string &name) {
    const std::string where = "tensor '" + tensor + "'";
    if (!j.is_object()) fail(name, where + " is not a JSON object");
    TensorInfo info;
    info.name = tensor;
    const auto dtype = j.find("dtype");
    if (dtype == j.end() || !dtype->is_string()) fail(name, where + " has no string 'dtype'");
    info.dtype = dtype->get<std::string>();
    const DtypeEntry *entry = find_dtype(info.dtype);
    if (!entry) fail(name, where + " has unknown dtype '" + info.dtype.substr(0, 32) + "'");
    info.type = entry->type;

    const auto shape = j.find("shape");
    if (shape == j.end() || !shape->is_array()) fail(name, where + " has no 'shape' list");
    if (shape->size() > kMaxTensorRank) fail(name, where + " has more than 8 dimensions");
    uint64_t numel = 1;
    for (const auto &d : *shape) {
        if (!d.is_number_unsigned()) fail(name, where + " has a shape entry that is not a non-negative integer");
        const uint64_t v = d.get<uint64_t>();
        if (v > uint64_t(INT64_MAX) || __builtin_mul_overflow(numel, v, &numel))
            fail(name, where + " has a shape too large to address");
        info.shape.push_back(static_cast<int64_t>(v));
    }
    uint64_t nbytes = 0;
    if (__builtin_mul_overflow(numel, uint64_t(entry->size), &nbytes))
        fail(name, where + " has a shape too large to address");

    const auto offsets = j.find("data_offsets");
    if (offsets == j.end() || !offsets->is_array() || offsets->size() != 2 ||
        !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned())
        fail(name, where + " needs 'data_offsets' as two non-negative integers");
    info.begin = (*offsets)[0].get<uint64_t>();
    info.end = (*offsets)[1].get<uint64_t>();
    if (info.end < info.begin) fail(name, where + " has data_offsets with end before begin");
    if (info.end - info.begin != nbytes)
        fail(name, where + " holds " + std::to_string(info.end - info.begin) + " bytes but its dtype " +
                       info.dtype + " and shape need " + std::to_string(nbytes));
    return info;
}

}  // namespace

size_t safetensors_dtype_size(const std::string &dtype) {
    const DtypeEntry *e = find_dtype(dtype);
    return e ? e->size : 0;
}

SafetensorsHeader parse_safetensors_header(const uint8_t *data, size_t size, const std::string &name) {
    if (size < 8) fail(name, "shorter than the 8-byte header length (truncated?)");
    const uint64_t header_len = read_u64_le(data);
    if (header_len > size - 8)
        fail(name, "header length " + std::to_string(header_len) + " goes beyond the end of the file (" +
                       std::to_string(size) + " bytes; truncated?)");
    if (header_len > kMaxSafetensorsHeader) fail(name, "header longer than 100 MiB");
    if (header_len < 2) fail(name, "header is too short to hold a JSON object");
    const char *text = reinterpret_cast<const char *>(data + 8);
    const nlohmann::json j = parse_json_object(std::string_view(text, header_len), name + " (its JSON header)");

    SafetensorsHeader header;
    header.data_start = 8 + header_len;
    const uint64_t data_size = size - header.data_start;
    for (const auto &[key, value] : j.items()) {
        if (key == "__metadata__") {
            if (!value.is_object()) fail(name, "'__metadata__' is not a JSON object");
            for (const auto &[mk, mv] : value.items()) {
                if (!mv.is_string()) fail(name, "'__metadata__' entry '" + mk + "' is not a string");
                header.metadata[mk] = mv.get<std::string>();
            }
            continue;
        }
        header.tensors.push_back(parse_entry(key, value, name));
    }
    std::sort(header.tensors.begin(), header.tensors.end(), [](const TensorInfo &a, const TensorInfo &b) {
        return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t expected = 0;
    for (const auto &t : header.tensors) {
        if (t.begin < expected)
            fail(name, "tensor '" + t.name + "' overlaps the previous tensor's data (offset " +
                           std::to_string(t.begin) + " < " + std::to_string(expected) + ")");
        if (t.begin > expected)
            fail(name, "tensor '" + t.name + "' leaves a gap before offset " + std::to_string(t.begin));
        if (t.end > data_size)
            fail(name, "tensor '" + t.name + "' ends at byte " + std::to_string(t.end) +
                           " beyond the data section of " + std::to_string(data_size) + " bytes (truncated?)");
        expected = t.end;
    }
    if (expected != data_size)
        fail(name, std::to_string(data_size - expected) + " bytes after the last tensor belong to no tensor");
    return header;
}

SafetensorsFile::SafetensorsFile(const std::string &path)
    : path_(path), map_(std::make_shared<const MappedFile>(path, "checkpoint file")) {
    header_ = parse_safetensors_header(map_->data(), map_->size(), path);
    for (size_t i = 0; i < header_.tensors.size(); ++i) index_[header_.tensors[i].name] = i;
}

const TensorInfo *SafetensorsFile::find(const std::string &name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

at::Tensor SafetensorsFile::tensor(const std::string &name) const {
    const TensorInfo *info = find(name);
    if (!info) throw_bad_input("checkpoint '" + path_ + "' has no tensor '" + name + "'");
    if (info->type == at::ScalarType::Undefined)
        throw_unsupported("tensor '" + name + "' in '" + path_ + "' has dtype " + info->dtype +
                          ", which libtorch cannot hold; convert the checkpoint to F16/BF16/F32");
    const uint8_t *src = map_->data() + header_.data_start + info->begin;
    const size_t nbytes = info->end - info->begin;
    if (info->type == at::kBool) {
        at::Tensor bytes = at::empty(info->shape, at::kByte);
        if (nbytes) std::memcpy(bytes.data_ptr(), src, nbytes);
        return bytes.ne(0);
    }
    at::Tensor out = at::empty(info->shape, info->type);
    if (nbytes) std::memcpy(out.data_ptr(), src, nbytes);
    release_mapped_pages(src, nbytes);  // copied: the mapped pages leave the resident set
    return out;
}

at::Tensor SafetensorsFile::view(const std::vector<std::string> &names) const {
    if (names.empty()) return {};
    const TensorInfo *first = find(names[0]);
    if (!first || first->type == at::ScalarType::Undefined || first->type == at::kBool || first->shape.empty())
        return {};
    int64_t rows = 0;
    uint64_t end = first->begin;
    for (const auto &name : names) {
        const TensorInfo *t = find(name);
        if (!t || t->type != first->type || t->begin != end || t->shape.size() != first->shape.size() ||
            !std::equal(t->shape.begin() + 1, t->shape.end(), first->shape.begin() + 1))
            return {};
        rows += t->shape[0];
        end = t->end;
    }
    const uint8_t *src = map_->data() + header_.data_start + first->begin;
    const size_t element = c10::elementSize(first->type);
    if (reinterpret_cast<uintptr_t>(src) % element != 0) return {};
    std::vector<int64_t> shape = first->shape;
    shape[0] = rows;
    // The header was validated: every tensor's bytes are its shape times its element size, so
    // the stacked shape covers [first->begin, end) exactly.
    std::shared_ptr<const MappedFile> keep = map_;
    return at::from_blob(const_cast<uint8_t *>(src), shape, [keep](void *) {}, at::TensorOptions().dtype(first->type));
}


namespace {

bool is_directory(const std::string &path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string &path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0;
}

bool ends_with(const std::string &s, const std::string &suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string dirname_of(const std::string &path) {
    const auto slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::map<std::string, std::string> parse_checkpoint_index(const std::string &text, const std::string &source) {
    const nlohmann::json j = parse_json_object(text, source);
    const auto map = j.find("weight_map");
    if (map == j.end() || !map->is_object()) throw_bad_input("checkpoint index '" + source + "' has no 'weight_map' object");
    std::map<std::string, std::string> out;
    for (const auto &[tensor, file] : map->items()) {
        if (!file.is_string())
            throw_bad_input("checkpoint index '" + source + "': weight_map entry '" + tensor.substr(0, 64) +
                            "' is not a file name");
        const std::string shard = file.get<std::string>();
        if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
            throw_bad_input("checkpoint index '" + source + "': shard '" + shard.substr(0, 64) +
                            "' must be a file name in the index's directory");
        out.emplace(tensor, shard);
    }
    if (out.empty()) throw_bad_input("checkpoint index '" + source + "' lists no tensors");
    return out;
}

Checkpoint::Checkpoint(const std::string &path) {
    std::string index_path, single;
    if (is_directory(path)) {
        dir_ = path;
        if (exists(path + "/model.safetensors.index.json")) index_path = path + "/model.safetensors.index.json";
        else if (exists(path + "/model.safetensors")) single = path + "/model.safetensors";
        else {
            // Some tools name the single file after the model (gptq_model-4bit-128g.safetensors).
            std::vector<std::string> found;
            if (DIR *d = opendir(path.c_str())) {
                while (const dirent *e = readdir(d))
                    if (ends_with(e->d_name, ".safetensors")) found.push_back(path + "/" + e->d_name);
                closedir(d);
            }
            if (found.size() != 1)
                throw_bad_input("checkpoint directory '" + path + "' holds " +
                                (found.empty() ? "no" : "several") +
                                " .safetensors files and no model.safetensors.index.json; "
                                "give the .safetensors file or the index itself");
            single = found.front();
        }
    } else if (ends_with(path, ".json")) {
        index_path = path;
        dir_ = dirname_of(path);
    } else {
        single = path;
        dir_ = dirname_of(path);
    }

    if (!single.empty()) {
        files_.push_back(std::make_unique<SafetensorsFile>(single));
        for (const auto &t : files_[0]->header().tensors) where_[t.name] = 0;
        return;
    }

    const std::map<std::string, std::string> weight_map =
        parse_checkpoint_index(read_bounded_file(index_path, kMaxIndexBytes, "checkpoint index"), index_path);
    std::map<std::string, size_t> shard_of_file;
    for (const auto &[tensor, shard] : weight_map) {
        auto it = shard_of_file.find(shard);
        if (it == shard_of_file.end()) {
            files_.push_back(std::make_unique<SafetensorsFile>(dir_ + "/" + shard));
            it = shard_of_file.emplace(shard, files_.size() - 1).first;
        }
        if (!files_[it->second]->find(tensor))
            throw_bad_input("checkpoint index '" + index_path + "' places tensor '" + tensor + "' in '" + shard +
                            "', which does not hold it");
        where_[tensor] = it->second;
    }
    // Tensors a shard holds but the index does not list are still readable; a name in two
    // shards is ambiguous.
    for (size_t f = 0; f < files_.size(); ++f)
        for (const auto &t : files_[f]->header().tensors) {
            const auto it = where_.find(t.name);
            if (it == where_.end()) where_[t.name] = f;
            else if (it->second != f && !weight_map.count(t.name))
                throw_bad_input("tensor '" + t.name + "' appears in two shards ('" + files_[it->second]->path() +
                                "' and '" + files_[f]->path() + "')");
        }
}

std::vector<std::string> Checkpoint::names() const {
    std::vector<std::string> out;
    for (const auto &[name, f] : where_) out.push_back(name);
    return out;
}

const TensorInfo &Checkpoint::info(const std::string &name) const {
    const auto it = where_.find(name);
    if (it == where_.end()) throw_bad_input("checkpoint '" + dir_ + "' has no tensor '" + name + "'");
    return *files_[it->second]->find(name);
}

at::Tensor Checkpoint::tensor(const std::string &name) const {
    const auto it = where_.find(name);
    if (it == where_.end()) throw_bad_input("checkpoint '" + dir_ + "' has no tensor '" + name + "'");
    return files_[it->second]->tensor(name);
}

at::Tensor Checkpoint::view(const std::vector<std::string> &names) const {
    if (names.empty() || !has(names[0])) return {};
    const size_t file = where_.at(names[0]);
    for (const auto &name : names)
        if (!has(name) || where_.at(name) != file) return {};
    return files_[file]->view(names);
}

uint64_t Checkpoint::bytes() const {
    uint64_t total = 0;
    for (const auto &f : files_) total += f->bytes();
    return total;
}

const std::map<std::string, std::string> &Checkpoint::metadata() const { return files_.front()->header().metadata; }

void write_safetensors(const std::string &dst, const std::vector<std::pair<std::string, at::Tensor>> &tensors,
                       const std::map<std::string, std::string> &metadata) {
    nlohmann::json header = nlohmann::json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::vector<at::Tensor> data;
    uint64_t offset = 0;
    for (const auto &[name, t] : tensors) {
        const char *dtype = dtype_name(t.scalar_type());
        TORCH_INTERNAL_ASSERT(dtype, "write_safetensors: no safetensors dtype for ", t.scalar_type());
        at::Tensor c = t.scalar_type() == at::kBool ? t.to(at::kByte).contiguous() : t.contiguous();
        const uint64_t n = static_cast<uint64_t>(c.numel()) * c.element_size();
        header[name] = {{"dtype", dtype}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + n}}};
        offset += n;
        data.push_back(c);
    }
    std::string text = header.dump();
    while ((8 + text.size()) % 8) text += ' ';  // keep the data section 8-byte aligned
    write_atomically(dst, [&](const std::string &tmp) {
        OutputFile out(tmp, dst);
        char len[8];
        uint64_t n = text.size();
        for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
        out.write(len, 8);
        out.write(text);
        for (const auto &c : data) out.write(c.data_ptr(), static_cast<size_t>(c.numel() * c.element_size()));
        out.close();
    });
}

}  // namespace ipex::woq
