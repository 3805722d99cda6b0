// Fuzz target: --hostfile text. Any bytes yield a host list that keeps the parser's
// promises (non-empty unique names that follow the host-name rule, slots in range, increasing lines)
// or a bad-input error, never a crash.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "base/errors.h"
#include "launch/host_name.h"
#include "launch/hostfile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    try {
        const auto hosts = ipex::launch::parse_hostfile(text, "fuzz");
        if (hosts.empty() || hosts.size() > ipex::launch::kMaxHostfileHosts) __builtin_trap();
        std::set<std::string> names;
        int last_line = 0;
        for (const auto &h : hosts) {
            if (h.name.empty() || h.name.size() > ipex::launch::kMaxHostName) __builtin_trap();
            if (h.name.find_first_of(" \t\r\n#:=") != std::string::npos) __builtin_trap();
            // Every accepted name follows the one host-name rule (no leading '-' for mpirun).
            if (!ipex::launch::host_name_problem(h.name, false).empty() || h.name[0] == '-') __builtin_trap();
            if (h.slots < 0 || h.slots > ipex::launch::kMaxHostSlots) __builtin_trap();
            if (h.line <= last_line) __builtin_trap();
            last_line = h.line;
            if (!names.insert(h.name).second) __builtin_trap();
        }
    } catch (const ipex::Error &e) {
        if (e.code() != ipex::ExitCode::bad_input) __builtin_trap();
    }
    return 0;
}
