// Where a decoder's tensors come from, by their Hugging Face names: a safetensors checkpoint
// (a directory, one file or shards) or a GGUF file, whose names, row order and metadata are
// mapped to the Hugging Face ones here so the one loader serves both.
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ipex::llm {

class TensorSource {
public:
    virtual ~TensorSource() = default;
    virtual bool has(const std::string &name) const = 0;
    virtual std::vector<int64_t> shape(const std::string &name) const = 0;
    // The dtype as the file states it ("BF16", "q4_K", ...), and whether the loader can take it.
    virtual std::string dtype(const std::string &name) const = 0;
    virtual bool readable(const std::string &name) const = 0;
    // fp32, bf16 or f16 (GGUF's quantized types dequantized to fp32).
    virtual at::Tensor tensor(const std::string &name) const = 0;
};

// A safetensors checkpoint (woq::Checkpoint).
std::unique_ptr<TensorSource> safetensors_source(const std::string &path);

// Whether `path` names a GGUF file (by its magic, not its name).
bool is_gguf(const std::string &path);

// A GGUF file: tensors under Hugging Face names (q/k rows of the "llama" architecture put back
// in rotate-half order), and its metadata as a Hugging Face config.json object for
// parse_config (exit 4 naming an architecture this loader does not map).
std::unique_ptr<TensorSource> gguf_source(const std::string &path);
nlohmann::json gguf_config(const std::string &path);
// The Hugging Face names of every tensor in the GGUF file, in file order (exit 4 naming a
// tensor without one; rope_freqs, which the config's rope scaling gives, is left out).
std::vector<std::string> gguf_tensor_names(const std::string &path);

}  // namespace ipex::llm
