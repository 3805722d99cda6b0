// Hugging Face tensor names beside GGUF's, per GGUF architecture, as llama.cpp's converter maps
// them: outside the layers, inside them ("blk.N."), and the 3-D expert tensors
// (blk.N.ffn_{gate,up,down}_exps, [experts, rows, columns]) whose slices along the first
// dimension are the per-expert Hugging Face tensors. Gemma's four norms per layer, Phi-3's fused
// attn_qkv and ffn_up (gate | up) and the mixtures' routers and shared experts have their own rows.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ipex::llm {

// The Hugging Face class of a GGUF file's general.architecture ("llama" with expert_count is
// Mixtral); exit 4 naming an architecture this loader does not map, with the supported list.
std::string gguf_hf_architecture(const nlohmann::json &metadata, const std::string &path);

// Where a Hugging Face tensor is in a GGUF file: a tensor, or one expert's slice of a 3-D one.
struct GgufSlot {
    std::string tensor;   // "" when the Hugging Face name has no GGUF counterpart
    int64_t expert = -1;  // the slice of a 3-D expert tensor, or -1 for the whole tensor
};
GgufSlot gguf_slot(const std::string &arch, const std::string &hf);

// The Hugging Face names a GGUF tensor holds: one, or one per expert (`experts` of them) for a
// 3-D expert tensor; empty when it has none.
std::vector<std::string> gguf_hf_names(const std::string &arch, const std::string &gguf, int64_t experts);

// Whether a GGUF tensor name is a stack of experts (blk.N.ffn_*_exps.weight).
bool is_expert_stack(const std::string &gguf);

// GGUF tensors llama.cpp derives from the config, which the Hugging Face form does not keep
// (rope_freqs: llama3 rope scaling; rope_factors_long/short: Phi-3's longrope lists).
bool is_rope_table(const std::string &gguf);

}  // namespace ipex::llm
