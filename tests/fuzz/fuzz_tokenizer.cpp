// Fuzz target: tokenizer.json. Any byte string parses into a tokenizer or fails with exit 3
// (malformed) or 4 (unsupported component), never a crash; what parses encodes a few texts
// (ids inside the vocabulary) and decodes them back without crashing. The input's tail after
// a NUL byte, if any, is also encoded as text.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "base/errors.h"
#include "llm/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *begin = reinterpret_cast<const char *>(data);
    const char *nul = static_cast<const char *>(std::memchr(begin, 0, size));
    const std::string json(begin, nul ? static_cast<size_t>(nul - begin) : size);
    const std::string extra = nul ? std::string(nul + 1, begin + size) : std::string();
    try {
        const ipex::llm::Tokenizer t = ipex::llm::Tokenizer::parse(json, "fuzz.json");
        for (const std::string &text : {std::string("Hello world's 123 \xc3\xa9\xe4\xbd\xa0 \xf0\x9f\x98\x80\n\n  x"), extra}) {
            try {
                const auto ids = t.encode(text);
                for (int32_t id : ids)
                    if (id < 0 || id >= t.vocab_size()) __builtin_trap();
                t.decode(ids);
                t.decode({-1, 0, 1, static_cast<int32_t>(t.vocab_size()), 1 << 30});
            } catch (const ipex::Error &e) {
                if (e.code() != ipex::ExitCode::bad_input) __builtin_trap();
            }
        }
    } catch (const ipex::Error &e) {
        if (e.code() != ipex::ExitCode::bad_input && e.code() != ipex::ExitCode::unsupported) __builtin_trap();
    }
    return 0;
}
