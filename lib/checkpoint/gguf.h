// Reader of GGUF files (llama.cpp's format, versions 2 and 3): the header, the metadata
// key/value pairs, the tensor infos and the aligned data section. The file is untrusted: every
// count, string length, array length, rank, dimension, type and offset is checked against the
// bytes that remain and against the bounds below before it is used, so a crafted file is exit 3
// naming the file and the field, never a large allocation or a read past the end. Tensors are
// memory-mapped and dequantized on request, exactly as the format defines each type.
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/mapped_file.h"
#include "checkpoint/woq_format.h"

namespace ipex::woq {

constexpr uint64_t kMaxGgufTensors = uint64_t(1) << 20;
constexpr uint64_t kMaxGgufMetadata = uint64_t(1) << 20;
constexpr uint64_t kMaxGgufString = uint64_t(1) << 26;       // one string's bytes
constexpr uint64_t kMaxGgufArray = uint64_t(1) << 26;        // one array's elements
constexpr uint64_t kMaxGgufMetadataItems = uint64_t(1) << 27;  // all metadata values together
constexpr uint32_t kMaxGgufRank = 4;

// ggml's tensor types this reader knows (the numbers the format stores).
enum class GgmlType : uint32_t {
    f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9, q2_k = 10, q3_k = 11,
    q4_k = 12, q5_k = 13, q6_k = 14, q8_k = 15, i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, bf16 = 30,
};

// Elements per block and bytes per block of a type; false for a number the reader does not know.
bool ggml_type_layout(uint32_t type, uint64_t &block_elements, uint64_t &block_bytes);
// "q4_K", "f16", ... (or "type N").
std::string ggml_type_name(uint32_t type);

struct GgufTensorInfo {
    std::string name;
    std::vector<int64_t> shape;  // PyTorch order: outermost first (the file stores innermost first)
    uint32_t type = 0;
    uint64_t offset = 0;  // relative to the data section
    uint64_t bytes = 0;
};

struct GgufHeader {
    uint32_t version = 0;
    nlohmann::json metadata = nlohmann::json::object();  // key -> value (arrays as JSON arrays)
    std::map<std::string, uint32_t> metadata_types;     // key -> GGUF value type
    std::vector<GgufTensorInfo> tensors;                 // in file order
    uint64_t alignment = 32;
    uint64_t data_start = 0;
};

// Validates the GGUF header held in data[0, size): exit 3 naming `name` and what is wrong, exit
// 4 for a version other than 2 or 3 and for tensor types the reader does not know.
GgufHeader parse_gguf_header(const uint8_t *data, size_t size, const std::string &name);

// Dequantizes `count` elements of `type` (a whole number of blocks) from src to fp32.
void dequantize_ggml(uint32_t type, const uint8_t *src, uint64_t count, float *dst);

// One memory-mapped, validated GGUF file.
class GgufFile {
public:
    explicit GgufFile(const std::string &path);
    GgufFile(const GgufFile &) = delete;
    GgufFile &operator=(const GgufFile &) = delete;

    const std::string &path() const { return path_; }
    const GgufHeader &header() const { return header_; }
    const nlohmann::json &metadata() const { return header_.metadata; }
    const GgufTensorInfo *find(const std::string &name) const;
    // The tensor as fp32, or as stored for f16 / bf16 / f32 (exit 3 when absent).
    at::Tensor tensor(const std::string &name) const;
    // Slice `index` of the outermost dimension (an expert of a 3-D expert tensor), read alone.
    at::Tensor tensor(const std::string &name, int64_t index) const;
    // A 2-D tensor (or slice `index` >= 0 of a 3-D one) of a type ggml_woq_held takes, as the
    // weight-only layer `layer` read straight from the file's blocks (gguf_woq.h: rows in
    // `row_order` when given); nullopt where the blocks are not held.
    std::optional<WoqLayer> woq_layer(const std::string &name, int64_t index, const std::string &layer,
                                      const std::vector<int64_t> *row_order = nullptr) const;

private:
    // Where slice `index` (-1: the whole tensor) starts in the data section, its bytes and shape.
    const GgufTensorInfo &slice(const std::string &name, int64_t index, uint64_t &offset, uint64_t &bytes,
                                std::vector<int64_t> &shape) const;
    at::Tensor read(const GgufTensorInfo &t, uint64_t offset, uint64_t bytes, const std::vector<int64_t> &shape) const;
    std::string path_;
    MappedFile map_;
    GgufHeader header_;
    std::map<std::string, size_t> index_;
};

}  // namespace ipex::woq
