// IPEX's qconfig summary of an LLM (the JSON `prepared_model.save_qconf_summary()` writes after
// SmoothQuant calibration, which `ipex.llm.optimize(..., qconfig_summary_file=...)` loads) read
// as our W8A8 qconfig (llm/w8a8_config.h). From each linear's entry in "q_op_infos" it takes:
//   fqn                                   model.layers.L.<module>, mapped to our projections:
//       self_attn.{q,k,v}_proj | self_attn.qkv_proj               -> self_attn.qkv_proj
//       self_attn.o_proj | mha_linear_add.linear                   -> self_attn.o_proj
//       mlp.{gate,up}_proj | linear_silu_mul.linear_{s,m} | mlp.gate_up_proj -> mlp.gate_up_proj
//       mlp.down_proj | mlp_linear_add.linear                      -> mlp.down_proj
//     (IPEX's reference decoder layers rename o_proj, down_proj, gate/up as on the right); other
//     entries (lm_head, attention matmuls) are not used.
//   input_tensor_infos[0]: force_dtype (else inf_dtype) torch.quint8 | torch.qint8, scale and
//     zero_point (a list of one number, or an object keyed "<op index>_<weight id>"): the
//     per-tensor step of the smoothed activation; smooth_quant_scaling_factor (IPEX multiplies
//     the input by it: our s is its inverse) when the weight's is absent.
//   weight_tensor_infos[0].smooth_quant_scaling_factor: IPEX multiplies the weight by it, our s.
// No factor at all: s = 1 (plain static int8). Our activations are symmetric int8: a zero point
// within one code of the middle of the range keeps the step (the one extreme code is clipped);
// another widens it to max(zp - qmin, qmax - zp) * scale / 127 so the summary's whole range stays
// representable. The parts of a merged projection (q/k/v, gate/up) read one input and must
// carry the same factors (IPEX's default share_weight_observers); their step is the largest.
// Weight scales are ours (per output channel of W * s). Errors: exit 3 naming the entry and
// field (missing, malformed, wrong channel count, no entry for a projection), exit 4 for a
// projection the summary keeps in float or parts smoothed differently.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>

#include "llm/config.h"
#include "llm/w8a8.h"

namespace ipex::llm {

// True when `j` has the summary's shape: a non-empty object whose every value is an object
// holding "q_op_infos".
bool is_ipex_qconf_summary(const nlohmann::json &j);

// The W8A8 parameters of every projection of the model `c` from the summary; `where` names the
// file in messages.
std::map<std::string, W8A8Spec> w8a8_from_ipex_summary(const nlohmann::json &summary, const ModelConfig &c,
                                                       const std::string &where);

}  // namespace ipex::llm
