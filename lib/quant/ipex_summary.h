// IPEX's qconfig summary (the JSON `prepared_model.save_qconf_summary()` writes) read as a
// qconfig for one model. The summary keys its entries by module ("" as " ", "a:b" for a.b) and
// execution index ("q_op_infos"), each with the op type and module path ("fqn") and tensor
// infos: dtypes (inf_dtype, force_dtype), per-tensor activation and per-channel weight
// "scale"/"zero_point", SmoothQuant "smooth_quant_scaling_factor"s. Tensors are numbered
// ("id") across the model, so an op's output scale is wherever the tensor it writes is
// quantized next, and a residual add the op feeds runs in int8 when the summary quantizes both
// its operands and its result. Conv/linear/matmul entries are matched to the model's
// quantizable ops by module path, kind and order within both; an entry that matches none is
// exit 3 naming it.
#pragma once

#include <nlohmann/json.hpp>
#include <torch/script.h>

#include <string>

#include "quant/qconfig.h"
#include "quant/quant_graph.h"

namespace ipex::quant {

// True when `j` has the summary's shape: an object of module entries holding "q_op_infos".
bool is_ipex_summary(const nlohmann::json &j);

// The qconfig the summary describes for `prepared`. Ops it keeps in float (force_dtype
// torch.float32 / torch.bfloat16) are listed fp32 / bf16; the model's quantizable ops it does
// not mention stay fp32 (a warning names them). An int8 op whose output the summary leaves
// unquantized (the model output, a float consumer) gets a range bounded from its input
// range and weights (a warning names it). `where` names the file in errors (exit 3).
QConfig qconfig_from_ipex_summary(const nlohmann::json &summary, const PreparedModel &prepared,
                                  const std::string &where);

// The qconfig in `path` for `model`: ipex-tool's qconfig as load_qconfig reads it, or IPEX's
// summary converted against the model; any other JSON is exit 3 saying what the two are.
QConfig load_qconfig_for_model(const std::string &path, const torch::jit::Module &model);

}  // namespace ipex::quant
