// Fuzz target: model files. Any bytes yield a model or an ipex error (bad input or
// unsupported), never a crash.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/errors.h"
#include "model/load.h"

// After a recovered loader crash libtorch's state is not trusted, and its static destructors
// may wait on a lock a skipped frame held: the process leaves without running them (the
// fuzzer has reported everything by then; a crash exits through its own path).
extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    std::atexit([] { std::_Exit(0); });
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // A crash inside libtorch's own loader is reported by load_model as exit 3 (the CLI ends
    // there); here it comes back as that Error so that fuzzing goes on past it.
    ipex::model::set_loader_crash_recovery(true);
    static const std::string path = "/tmp/ipex-fuzz-model-" + std::to_string(::getpid()) + ".pt";
    {
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char *>(data), static_cast<std::streamsize>(size));
    }
    try {
        ipex::model::load_model(path);
    } catch (const ipex::Error &e) {
        if (e.code() != ipex::ExitCode::bad_input && e.code() != ipex::ExitCode::unsupported) __builtin_trap();
    }
    std::remove(path.c_str());
    return 0;
}
