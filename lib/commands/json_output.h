// Where a command's JSON report goes (--json, --json FILE, --report FILE|-) and where its text
// report goes beside it. One rule for every command:
//   no JSON        the text on standard output
//   JSON to FILE   the JSON in FILE (written atomically), the text on standard error
//   JSON to -      the JSON on standard output, no text
// (optimize prints no text report: its one line goes through log::info.)
#pragma once

#include <nlohmann/json.hpp>

#include <ostream>
#include <string>
#include <vector>

namespace ipex::commands {

struct JsonOutput {
    std::string target;  // "": none; "-": standard output; else a file

    bool wanted() const { return !target.empty(); }
    bool to_stdout() const { return target == "-"; }
    bool to_file() const { return wanted() && !to_stdout(); }

    // Exit 2/3 unless a file target can be written and is none of `inputs`: checked before
    // the work, so that a run never ends on an output it cannot write.
    void check(const std::vector<std::string> &inputs) const;
    // The JSON (two-space indent, a final newline) to the target; nothing without one.
    void write(const nlohmann::json &report) const;
    // Where the text report goes beside the JSON: stdout, stderr, or nullptr (JSON on stdout).
    std::ostream *text_stream() const;
};

// The report's JSON to its target, then its text to text_stream().
template <class Report>
void emit(const JsonOutput &output, const Report &report) {
    output.write(report.to_json());
    if (std::ostream *text = output.text_stream()) *text << report.text();
}

}  // namespace ipex::commands
