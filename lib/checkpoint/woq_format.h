// The normalized weight-only checkpoint (`ipex-tool import` writes it, `optimize
// --low-precision-checkpoint` reads it): a safetensors file holding, per quantized Linear
// <name>, the tensors of woq_layout.h
//   <name>.qweight U8 [N, Kp/2] or [N, Kp]   <name>.scales F32 [N, G]   <name>.zeros F32 [N, G]
//   <name>.perm I64 [K] (act-order only)      <name>.bias F32 [N] (when the checkpoint has one)
// and in __metadata__: "format" = "ipex-woq", "format_version" = "1", "layers" (JSON list of
// {name, in_features, out_features, bits, group_size, source_group_size, act_order, bias}),
// "full_precision" (JSON list of modules the source kept unquantized), "source" (JSON).
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ipex::woq {

constexpr const char *kWoqFormat = "ipex-woq";
constexpr const char *kWoqFormatVersion = "1";

// How lowp mode "auto" picks the activations of weight-only layers: bf16 or fp32.
enum class LowpAuto {
    // optimize: bf16 when the model computes in bf16 or the CPU has BF16 dot products
    // (AVX512-BF16, or AMX-BF16 this process may use).
    bf16_model_or_cpu,
    // LLM runs of a bf16 model: int4 weights on a CPU with AVX512-BF16 and VNNI (no AMX) take
    // int8 activations for prefill (decode steps stay bf16), as IPEX's AUTO gives int4 weights
    // INT8 and llama.cpp multiplies q4_0 with q8_0; otherwise bf16 when the CPU has BF16 dot
    // products, else int8 when it has AVX2 (int8 activations meet int4/int8 weights in
    // VPMADDUBSW at about half the instructions of the fp32 kernel per weight), else fp32. An
    // fp32 model runs fp32.
    bf16_model_best_dot,
};

// The rule in words, for help texts.
std::string lowp_auto_text(LowpAuto rule);

// `mode` (auto when unset) resolved to fp32, bf16 or int8 for a model computing in `dtype`
// whose weight-only layers hold `weight_bits` bits (4, 8; 0 when not known).
std::string resolve_lowp_mode(const std::optional<std::string> &mode, const std::string &dtype, LowpAuto rule,
                              int weight_bits = 0);

struct WoqLayer {
    std::string name;                // module path, "model.layers.0.self_attn.q_proj"
    int64_t in_features = 0, out_features = 0;
    int bits = 4;                    // 4 | 8
    int64_t group_size = 0;          // kernel group size: divides in_features
    int64_t source_group_size = 0;   // as the source stated it (-1: per output channel)
    bool act_order = false;          // channels stored in `perm` order
    at::Tensor qweight;              // packed, see woq_layout.h
    at::Tensor scales, zeros;        // float [N, G]
    at::Tensor perm;                 // int64 [K] or undefined
    at::Tensor bias;                 // float [N] or undefined

    int64_t groups() const { return in_features / group_size; }
    uint64_t bytes() const;          // of all tensors
};

// Builds a layer from quantized values q (uint8 [N, K], channels in natural order), the
// group of every input channel g_idx (int64 [K], values < G), and scales/zeros (float
// [N, G]). Channels are sorted by group (act-order) and regrouped so that every kernel group
// is contiguous and of one size (the gcd of the source's group sizes). Throws exit 3 when
// g_idx is out of range.
WoqLayer make_layer(const std::string &name, const at::Tensor &q, const at::Tensor &g_idx,
                    const at::Tensor &scales, const at::Tensor &zeros, const at::Tensor &bias, int bits,
                    int64_t source_group_size);

// A layer of `rows` output and `cols` input channels with its packed weight (woq_layout.h) and
// its float scales and zeros [rows, cols / group_size] allocated, not filled; no perm, no bias.
// group_size must divide cols.
WoqLayer allocate_layer(const std::string &name, int64_t rows, int64_t cols, int bits, int64_t group_size,
                        int64_t source_group_size);

// Packs uint8 [N, K] values into the kernel layout, and back.
at::Tensor pack_weight(const at::Tensor &q, int bits);
at::Tensor unpack_weight(const at::Tensor &packed, int bits, int64_t in_features);

// The float [N, K] weight the layer stands for, channels in natural order.
at::Tensor dequantize(const WoqLayer &layer);
// Rows `rows` (int64 indices into [0, out_features)) of that weight, float [rows, K], the same
// values as dequantize's rows: a quantized embedding table's lookup.
at::Tensor dequantize_rows(const WoqLayer &layer, const at::Tensor &rows);

// Round-to-nearest asymmetric quantization of a float [N, K] weight (group_size -1: one
// group per output channel). Throws exit 4 when group_size does not divide K.
WoqLayer quantize_rtn(const std::string &name, const at::Tensor &weight, const at::Tensor &bias, int bits,
                      int64_t group_size);

struct WoqCheckpoint {
    std::map<std::string, WoqLayer> layers;       // by module path
    std::vector<std::string> full_precision;      // modules the source left unquantized
    nlohmann::json source = nlohmann::json::object();  // where it came from
};

void write_woq_checkpoint(const std::string &dst, const WoqCheckpoint &checkpoint);

class Checkpoint;
// True when the file's metadata says it is a normalized checkpoint.
bool is_woq_checkpoint(const Checkpoint &file);
// Reads and validates a normalized checkpoint (exit 3 naming the layer and tensor).
WoqCheckpoint read_woq_checkpoint(const Checkpoint &file);

}  // namespace ipex::woq
