// Diagnostics on stderr: "<program>: warning: ...". Quiet on success unless asked.
#pragma once

#include <string>

namespace ipex::log {

enum class Level { quiet = 0, normal = 1, verbose = 2 };

void set_program(const std::string &name);
const std::string &program();
void set_level(Level level);
Level level();

void warn(const std::string &message);
void info(const std::string &message);     // shown unless --quiet
void verbose(const std::string &message);  // shown with --verbose

}  // namespace ipex::log
