// Where a decoder's tensors come from, by their Hugging Face names: a safetensors checkpoint
// (a directory, one file or shards) or a GGUF file, whose names, row order and metadata are
// mapped to the Hugging Face ones here so the one loader serves both.
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/woq_format.h"

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
    // The tensors `names` stacked along their first dimension as one read-only view of the
    // mapped file, no copy (woq::SafetensorsFile::view), where they lie there one after another
    // as stored; undefined otherwise (then read tensor()). Never to be written.
    virtual at::Tensor view(const std::vector<std::string> &names) const {
        (void)names;
        return {};
    }
    // Whether the projection `module`'s weight (`<module>.weight`) is stored in a type held as a
    // weight-only layer (GGUF q4_0, q4_1, q8_0, q4_K, q5_K exactly; q6_K converted to int8 g32
    // within the bound of checkpoint/gguf_woq.h), and that layer, read from the file's blocks
    // without a dense copy (no bias); nullopt where the blocks are not held (then read tensor()).
    virtual bool stored_woq(const std::string &module) const { (void)module; return false; }
    virtual std::optional<woq::WoqLayer> woq_layer(const std::string &module) const {
        (void)module;
        return std::nullopt;
    }
};

// A safetensors checkpoint (woq::Checkpoint).
std::unique_ptr<TensorSource> safetensors_source(const std::string &path);

// Whether `path` names a GGUF file (by its magic, not its name).
bool is_gguf(const std::string &path);

// A GGUF file (architectures llama, with expert_count Mixtral, qwen2, qwen3, gemma2, gemma3,
// phi3, qwen2moe, qwen3moe): tensors under Hugging Face names (q/k rows of the "llama"
// architecture put back in rotate-half order, Gemma's norms back to w from llama.cpp's 1 + w,
// each expert a slice of its 3-D stack), and its metadata as a Hugging Face config.json object
// for parse_config (gguf_config.cpp). Exit 4 naming an architecture or a tensor (a vision tower,
// a projector) this loader does not map; exit 3 naming an expert stack of the wrong size or a
// missing expert or shared-expert tensor.
std::unique_ptr<TensorSource> gguf_source(const std::string &path);
nlohmann::json gguf_config(const std::string &path);
// The Hugging Face names of every tensor in the GGUF file, in file order, one per expert for the
// 3-D expert stacks (rope_freqs and rope_factors_*, which the config gives, are left out).
std::vector<std::string> gguf_tensor_names(const std::string &path);

}  // namespace ipex::llm
