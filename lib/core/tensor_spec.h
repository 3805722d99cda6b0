// Model inputs from command-line SPECs (DESIGN.md):
//   16x3x224x224          random fp32 tensor (standard normal)
//   16x3x224x224:bf16     random tensor of another dtype (fp32 bf16 fp16 fp64)
//   16x128:int64[:HIGH]   random integers in [0, HIGH) (default HIGH 100); also int32
//   file.pt               a tensor, or a tuple/list of tensors, saved by torch.save
//   file.npy              a NumPy array
// A file holding a tuple/list contributes each element as one positional input.
#pragma once

#include <ATen/core/ivalue.h>

#include "core/sizes_text.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ipex {

// Upper bound on elements of one random tensor (keeps a typo from exhausting memory).
constexpr int64_t kMaxSpecElements = int64_t(1) << 32;

struct ShapeSpec {
    std::vector<int64_t> sizes;
    at::ScalarType dtype = at::kFloat;
    int64_t high = 100;  // integer dtypes: values in [0, high)
};

// True when `text` looks like a shape (digits and 'x'), not a path.
bool is_shape_spec(const std::string &text);

// Parses "AxBxC[:dtype[:HIGH]]"; throws a usage error (exit 2) naming the SPEC.
ShapeSpec parse_shape_spec(const std::string &text);

// Reads a tensor or a tuple/list of tensors saved by torch.save; exit 3 on bad files.
std::vector<c10::IValue> load_tensor_file(const std::string &path);

// Builds forward's positional inputs from SPECs; random tensors use `seed`.
std::vector<c10::IValue> make_inputs(const std::vector<std::string> &specs, uint64_t seed);

// Copies inputs deeply (tensors cloned) so in-place ops of one run cannot leak into the next.
std::vector<c10::IValue> clone_inputs(const std::vector<c10::IValue> &inputs);

// Short description like "16x3x224x224:fp32" for reports.
std::string describe_inputs(const std::vector<c10::IValue> &inputs);

// Names dtypes the way the CLI does: fp32, bf16, fp16, int64...
std::string dtype_name(at::ScalarType type);

}  // namespace ipex
