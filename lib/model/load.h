// TorchScript load/save with errors a user can act on (exit 3 for bad files) and
// atomic writes. Models written by `ipex-tool optimize` carry a JSON record of how
// they were made in the archive's extra files.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/script.h>

#include <optional>
#include <string>
#include <vector>

namespace ipex::model {

// Name of the extra file that records optimize metadata inside the archive.
constexpr const char *kMetadataFile = "ipex/optimize.json";

struct LoadedModel {
    torch::jit::Module module;
    std::string path;
    std::optional<nlohmann::json> metadata;  // present when written by ipex-tool
    uint64_t bytes = 0;                      // file size
};

// Classifies and loads a TorchScript archive. Missing file, directory, empty file,
// non-zip, zip without TorchScript code, torch.save'd nn.Module pickles and truncated
// archives are all exit 3 with a message naming the file and what to do.
// libtorch's loader dereferences damaged code records unchecked; a crash inside it (a
// signal while it runs) ends the process with that exit 3 message instead of the signal.
LoadedModel load_model(const std::string &path);

// For fuzzing: a crash inside libtorch's loader becomes an Error(bad_input) thrown from
// load_model instead of ending the process (the loader's state is not trusted afterwards).
void set_loader_crash_recovery(bool on);
// How many loader crashes were turned into errors since the process started.
int loader_crashes_recovered();

// Writes `module` to `dst` atomically, with `metadata` as the extra file when given.
void save_model(const torch::jit::Module &module, const std::string &dst,
                const std::optional<nlohmann::json> &metadata);

// The --sample-input SPECs optimize recorded in the model (shapes and dtypes, e.g.
// "16x3x224x224:fp32"), or none.
std::vector<std::string> recorded_sample_inputs(const LoadedModel &model);

// Runs forward on inputs (no grad); model errors become exit 3 naming the model and
// relaying its own first message lines. A forward taking one List[Tensor] (a torchvision
// detector's images) gets the input tensors as that list.
c10::IValue run_forward(torch::jit::Module &module, const std::vector<c10::IValue> &inputs,
                        const std::string &what);

}  // namespace ipex::model
