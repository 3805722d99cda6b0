// --threads, the intra-op threads of every command that takes it (bench, bench --llm,
// generate, perplexity, info --limits): one range, one check.
#pragma once

#include <optional>

namespace ipex::commands {

// `asked` when given (exit 2 "--threads must be in [1, 4096], got N" outside that range),
// else default_threads(): OMP_NUM_THREADS, or the physical cores this process may run on.
int thread_count(const std::optional<int> &asked);

}  // namespace ipex::commands
