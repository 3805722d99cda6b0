#include "base/log.h"

#include <iostream>

namespace ipex::log {
namespace {
std::string g_program = "ipex-tool";
Level g_level = Level::normal;
}  // namespace

void set_program(const std::string &name) { g_program = name; }
const std::string &program() { return g_program; }
void set_level(Level level) { g_level = level; }
Level level() { return g_level; }

void warn(const std::string &message) {
    std::cerr << g_program << ": warning: " << message << "\n";
}
void info(const std::string &message) {
    if (g_level >= Level::normal) std::cerr << g_program << ": " << message << "\n";
}
void verbose(const std::string &message) {
    if (g_level >= Level::verbose) std::cerr << g_program << ": " << message << "\n";
}

}  // namespace ipex::log
