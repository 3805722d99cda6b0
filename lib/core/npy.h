// Reader for NumPy .npy files (format versions 1.0, 2.0, 3.0), and a float32 writer. The file
// read is untrusted: every length and offset is bounded before use; errors are exit 3 naming
// the field.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace ipex {

// Largest array payload accepted from one file.
constexpr uint64_t kMaxNpyBytes = uint64_t(8) << 30;

// Parses the bytes of an .npy file; `name` is used in messages.
at::Tensor parse_npy(const std::string &bytes, const std::string &name);

// Reads and parses a file.
at::Tensor load_npy(const std::string &path);

// Writes a float32 tensor as an .npy file (format 1.0, little-endian, C order), atomically
// (base/atomic_file.h): what NumPy's np.load and load_npy read.
void save_npy(const std::string &path, const at::Tensor &t);

}  // namespace ipex
