// Fuzz target: the GGUF header parser must turn any byte string into a validated header (every
// tensor's bytes inside the data section, no two overlapping, shapes whole blocks of their type)
// or a bad-input / unsupported error, never a crash, a read outside the buffer or an allocation
// the bytes do not pay for; a valid header's tensors dequantize without leaving their bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/errors.h"
#include "checkpoint/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    try {
        const auto header = ipex::woq::parse_gguf_header(data, size, "fuzz.gguf");
        if (!header.tensors.empty() && header.data_start > size) __builtin_trap();
        for (const auto &t : header.tensors) {
            uint64_t block_elements = 0, block_bytes = 0;
            if (!ipex::woq::ggml_type_layout(t.type, block_elements, block_bytes)) __builtin_trap();
            if (t.offset + t.bytes > size - header.data_start) __builtin_trap();
            uint64_t numel = 1;
            for (const int64_t d : t.shape) numel *= static_cast<uint64_t>(d);
            if (numel % block_elements != 0 || numel / block_elements * block_bytes != t.bytes) __builtin_trap();
            if (numel > (uint64_t(1) << 16)) continue;  // dequantize the small ones
            std::vector<float> out(numel);
            try {
                ipex::woq::dequantize_ggml(t.type, data + header.data_start + t.offset, numel, out.data());
            } catch (const ipex::Error &e) {
                if (e.code() != ipex::ExitCode::unsupported) __builtin_trap();
            }
        }
    } catch (const ipex::Error &e) {
        if (e.code() != ipex::ExitCode::bad_input && e.code() != ipex::ExitCode::unsupported) __builtin_trap();
    }
    return 0;
}
