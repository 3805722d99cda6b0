// The `ipex` TorchScript operator namespace. Other folders add their ops with
// TORCH_LIBRARY_FRAGMENT(ipex, m); this is the one TORCH_LIBRARY(ipex, m).
#include <torch/library.h>

TORCH_LIBRARY(ipex, m) {}
