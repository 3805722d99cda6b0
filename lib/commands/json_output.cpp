#include "commands/json_output.h"

#include <iostream>

#include "base/atomic_file.h"

namespace ipex::commands {

void JsonOutput::check(const std::vector<std::string> &inputs) const {
    if (to_file()) check_output_path(target, inputs);
}

void JsonOutput::write(const nlohmann::json &report) const {
    if (wanted()) write_text_atomically(target, report.dump(2) + "\n");
}

std::ostream *JsonOutput::text_stream() const {
    if (!wanted()) return &std::cout;
    return to_file() ? &std::cerr : nullptr;
}

}  // namespace ipex::commands
