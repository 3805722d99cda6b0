// The --[no-]KNOB flags of `ipex-tool optimize` and their defaults per level: the level table.
// Torch-free, so the build writes recipes/optimize-levels.json from it (write_levels.cpp); the
// passes each knob switches name it in the pass list (pipeline.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace ipex::passes {

struct Knob {
    const char *flag;  // "conv-bn-folding"
    bool on_at_o1;     // default at O1 (everything is off at O0)
    const char *help;
};

inline constexpr Knob kKnobs[] = {
    {"replace-dropout", true, "remove dropout (every variant; inference only)"},
    {"conv-bn-folding", true, "fold BatchNorm into the preceding conv/conv-transpose"},
    {"linear-bn-folding", true, "fold BatchNorm1d into the preceding Linear"},
    {"concat-linear", true, "merge Linears that share an input into one Linear and a split"},
    {"channels-last", true, "channels-last weights (and entry) for 2-D convolutions"},
    {"fuse-attention", true,
     "replace attention written out as matmul, scale, mask, softmax and matmul by one blocked attention op "
     "(needs libipex_ops.so; off with --portable or --no-weights-prepack)"},
    {"weights-prepack", true,
     "run conv/linear as oneDNN ops with weights prepacked once and elementwise neighbours fused "
     "(needs libipex_ops.so to run; --portable turns it off)"},
    {"optimize-lstm", true,
     "run LSTM/GRU layers as oneDNN RNN ops with weights prepacked once (needs libipex_ops.so; off with "
     "--portable or --no-weights-prepack; proj_size, packed sequences and training dropout stay aten)"},
    {"conv-chains", true,
     "run each convolution that alone reads the one before it (a 1x1 expansion and its depthwise layer), "
     "a max pooling that alone reads a convolution (a stem), and residual blocks of convolutions (a ResNet "
     "stage), in one op, a few images at a time when their activations outgrow the cache (needs "
     "libipex_ops.so; off with --portable or --no-weights-prepack)"},
    {"embedding-int8", false,
     "store the EmbeddingBag tables merge_embedding_bags takes as uint8 rows with a per-row fp32 scale and "
     "bias (a quarter of the fp32 bytes; each pooled value within sum |w| * row range / 510 of fp32, see "
     "the man page; needs libipex_ops.so: off with --portable or --no-weights-prepack)"},
    {"auto-kernel-selection", false,
     "for fp32 linears, time the oneDNN op against aten::linear at the --sample-input shape and keep the "
     "faster; for convolutions with an own kernel beside oneDNN's (depthwise, 1x1, grouped, or ending in "
     "sigmoid/SiLU), time both at the shapes the sample input gives them and save the faster in the model"},
};

// The knob named `flag`, or nullptr.
inline const Knob *find_knob(const std::string &flag) {
    for (const Knob &k : kKnobs)
        if (flag == k.flag) return &k;
    return nullptr;
}

// The level table as recipes/optimize-levels.json has it (the build writes that file from this).
inline nlohmann::json levels_json() {
    nlohmann::json o1 = nlohmann::json::object(), help = nlohmann::json::object();
    for (const Knob &k : kKnobs) {
        o1[k.flag] = k.on_at_o1;
        help[k.flag] = k.help;
    }
    return {{"format_version", 2},
            {"description", "Knobs of `ipex-tool optimize` and their defaults per level, written by the build "
                            "from the knob table. O0 writes the model unchanged; an explicit --KNOB/--no-KNOB "
                            "overrides the level."},
            {"levels", {{"O0", nlohmann::json::object()}, {"O1", o1}}},
            {"help", help}};
}

}  // namespace ipex::passes
