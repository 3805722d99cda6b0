#include "commands/threads.h"

#include <string>

#include "base/errors.h"
#include "core/system_info.h"

namespace ipex::commands {

int thread_count(const std::optional<int> &asked) {
    if (!asked) return default_threads();
    if (*asked < 1 || *asked > kMaxThreads)
        throw_usage("--threads must be in [1, " + std::to_string(kMaxThreads) + "], got " + std::to_string(*asked));
    return *asked;
}

}  // namespace ipex::commands
