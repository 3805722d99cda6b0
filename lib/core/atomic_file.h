// Output files are written to a temporary file beside the destination and renamed,
// so a failed or interrupted run never leaves a half-written file behind.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace ipex {

// Throws (exit 3) unless `path` names a readable, non-empty regular file.
void check_input_file(const std::string &path, const std::string &what);

// Throws (exit 2/3) unless `dst` can be created: its directory exists and is writable,
// it is not a directory, and it is not the same file as any of `inputs`.
void check_output_path(const std::string &dst, const std::vector<std::string> &inputs);

// Calls writer(tmp) with a fresh temporary path in dst's directory, then renames tmp
// to dst. On any exception (or SIGINT/SIGTERM) the temporary file is removed.
void write_atomically(const std::string &dst,
                      const std::function<void(const std::string &tmp)> &writer);

// Convenience: write text ("-" means stdout, written directly).
void write_text_atomically(const std::string &dst, const std::string &text);

}  // namespace ipex
