// How the LLM commands (generate, perplexity, bench --llm) load a Hugging Face decoder: the
// dtype, the weight-only quantization on load and the threads.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "commands/weight_only.h"
#include "llm/model.h"

namespace ipex::commands {

struct LlmLoadRequest {
    std::string dtype = "bf16";  // bf16 | fp32: dense weights and activations
    WoqRequest woq;              // --group-size unset: kGroupAuto; --lowp-mode auto: LowpAuto::bf16_model_best_dot
    std::optional<int> threads;  // unset: default_threads()
    std::string qconfig;         // --qconfig: SmoothQuant W8A8 from 'ipex-tool calibrate-llm', "" for none
    bool no_mmap = false;        // --no-mmap: dense weights copied out of the mapped checkpoint

    // Exit 2 naming the option unless --threads and --group-size lie in their ranges; nothing is read.
    void check() const;
    llm::LoadOptions options() const;
};

// Loads MODEL_DIR with the request's options on its threads.
std::shared_ptr<const llm::Model> load_llm(const std::string &dir, const LlmLoadRequest &request);

}  // namespace ipex::commands
