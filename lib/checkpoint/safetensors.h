// Reader and writer of safetensors files (single file or sharded with
// model.safetensors.index.json). The file is untrusted: the header length, the JSON, every
// dtype, shape and offset are validated (offsets sorted, contiguous, inside the file) before
// any tensor data is touched. Files are memory-mapped; errors are exit 3 naming the file and
// the tensor or field.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/mapped_file.h"

namespace ipex::woq {

// Largest JSON header accepted (the format's own reference reader uses the same bound).
constexpr uint64_t kMaxSafetensorsHeader = uint64_t(100) << 20;
// Largest index file (model.safetensors.index.json) accepted.
constexpr uint64_t kMaxIndexBytes = uint64_t(64) << 20;
constexpr size_t kMaxTensorRank = 8;

struct TensorInfo {
    std::string name;
    std::string dtype;          // as written: "F32", "BF16", "I32", ...
    at::ScalarType type;        // at::ScalarType::Undefined when libtorch has no such dtype
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;  // offsets relative to the data section
};

struct SafetensorsHeader {
    std::vector<TensorInfo> tensors;              // sorted by offset
    std::map<std::string, std::string> metadata;  // "__metadata__"
    uint64_t data_start = 0;                      // 8 + header length
};

// Validates the header of a safetensors file held in `data[0, size)`; `name` is used in
// messages. Throws exit 3 on anything malformed.
SafetensorsHeader parse_safetensors_header(const uint8_t *data, size_t size,
                                           const std::string &name);

// Bytes per element of a safetensors dtype name, or 0 when the name is unknown.
size_t safetensors_dtype_size(const std::string &dtype);

// One memory-mapped, validated safetensors file.
class SafetensorsFile {
public:
    explicit SafetensorsFile(const std::string &path);
    SafetensorsFile(const SafetensorsFile &) = delete;
    SafetensorsFile &operator=(const SafetensorsFile &) = delete;

    const std::string &path() const { return path_; }
    const SafetensorsHeader &header() const { return header_; }
    uint64_t bytes() const { return map_->size(); }
    const TensorInfo *find(const std::string &name) const;
    // A copy of the tensor's data (exit 3 when absent, exit 4 for dtypes libtorch lacks); the
    // mapped pages it was copied from are released from the resident set.
    at::Tensor tensor(const std::string &name) const;
    // The tensors `names`, stacked along their first dimension, as one read-only tensor over the
    // mapped file itself (it keeps the mapping alive): no copy, the pages shared with the page
    // cache and read in as they are first touched. Undefined unless they all lie in this file
    // one right after another in this order, share a dtype libtorch holds (not bool) and the
    // sizes past the first, and start at a multiple of their element size. The tensor must not
    // be written (the mapping is read-only).
    at::Tensor view(const std::vector<std::string> &names) const;

private:
    std::string path_;
    std::shared_ptr<const MappedFile> map_;
    SafetensorsHeader header_;
    std::map<std::string, size_t> index_;
};

// A checkpoint: one .safetensors file, a model.safetensors.index.json, or a directory holding
// either. Tensor names are unique over all shards.
// model.safetensors.index.json's weight_map: tensor name -> shard file name (a plain name in the
// index's directory). Exit 3 naming `source` for anything else, or an empty map.
std::map<std::string, std::string> parse_checkpoint_index(const std::string &text, const std::string &source);

class Checkpoint {
public:
    explicit Checkpoint(const std::string &path);

    const std::string &directory() const { return dir_; }
    std::vector<std::string> names() const;  // sorted
    bool has(const std::string &name) const { return where_.count(name) != 0; }
    const TensorInfo &info(const std::string &name) const;
    at::Tensor tensor(const std::string &name) const;
    // SafetensorsFile::view over the shard holding them all (undefined where they are split).
    at::Tensor view(const std::vector<std::string> &names) const;
    uint64_t bytes() const;  // sum of the shard file sizes
    // __metadata__ of the first shard.
    const std::map<std::string, std::string> &metadata() const;
    const std::vector<std::unique_ptr<SafetensorsFile>> &files() const { return files_; }

private:
    std::string dir_;
    std::vector<std::unique_ptr<SafetensorsFile>> files_;
    std::map<std::string, size_t> where_;  // tensor -> file index
};

// Writes a safetensors file atomically. Tensors are written in the given order, contiguous,
// little-endian; metadata values are strings.
void write_safetensors(const std::string &dst,
                       const std::vector<std::pair<std::string, at::Tensor>> &tensors,
                       const std::map<std::string, std::string> &metadata);

}  // namespace ipex::woq
