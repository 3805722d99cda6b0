// Fuzz target: the safetensors header parser, the sharded checkpoint's index parser and the
// quantization-config parser must turn any
// byte string into a validated header/config or a bad-input (or unsupported) error, never a
// crash or an offset outside the buffer.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/errors.h"
#include "checkpoint/quant_config.h"
#include "checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        const auto header = ipex::woq::parse_safetensors_header(data, size, "fuzz.safetensors");
        if (header.data_start > size) __builtin_trap();
        for (const auto &t : header.tensors) {
            if (t.end < t.begin || t.end > size - header.data_start) __builtin_trap();
            uint64_t numel = 1;
            for (const int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
            if (numel * ipex::woq::safetensors_dtype_size(t.dtype) != t.end - t.begin) __builtin_trap();
        }
    } catch (const ipex::Error &e) {
        if (e.code() != ipex::ExitCode::bad_input) __builtin_trap();
    }
    try {
        const auto map = ipex::woq::parse_checkpoint_index(std::string(reinterpret_cast<const char *>(data), size),
                                                           "model.safetensors.index.json");
        for (const auto &[tensor, shard] : map)
            if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..") __builtin_trap();
    } catch (const ipex::Error &e) {
        if (e.code() != ipex::ExitCode::bad_input) __builtin_trap();
    }
    try {
        ipex::woq::parse_quant_config(std::string(reinterpret_cast<const char *>(data), size), "fuzz.json");
    } catch (const ipex::Error &e) {
        if (e.code() != ipex::ExitCode::bad_input && e.code() != ipex::ExitCode::unsupported) __builtin_trap();
    }
    return 0;
}
