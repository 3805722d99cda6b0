// `ipex-tool import gguf IN.gguf OUT_DIR`: a GGUF file written out as a Hugging Face model
// directory that generate/bench/perplexity (and other tools) load: model.safetensors (shards of
// at most 2 GiB with model.safetensors.index.json when larger), config.json, generation_config.json,
// tokenizer.json and tokenizer_config.json (bos/eos/unk/pad names, add_bos/add_eos, chat_template).
// Tensors get their Hugging Face names and row order (the llama architecture's q/k rows put back);
// every type is dequantized and written as fp32 (default, exact for every GGUF type) or bf16.
// Everything is read and checked before anything is written; the directory is built beside
// OUT_DIR and renamed onto it, so OUT_DIR is never half-written. An OUT_DIR holding files is
// refused (exit 2) unless force; then it is replaced whole.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace ipex::commands {

struct ImportGgufRequest {
    std::string checkpoint, out;
    std::string dtype = "fp32";  // fp32 | bf16
    bool force = false;
};

struct ImportGgufReport {
    // {checkpoint, output, architecture, dtype, tensors, shards, bytes_out, tokenizer (the GGUF
    //  kind, or null with tokenizer_note when it is not read), chat_template (kept), files}
    nlohmann::json summary;

    nlohmann::json to_json() const { return summary; }
    std::string text() const;
};

ImportGgufReport run_import_gguf(const ImportGgufRequest &request);

}  // namespace ipex::commands
