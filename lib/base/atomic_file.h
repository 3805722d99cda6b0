// Output files are written to a temporary file beside the destination and renamed,
// so a failed or interrupted run never leaves a half-written file behind.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace ipex {

// `path` made absolute, symbolic links and ".." resolved; a path that does not exist yet keeps
// its last component under its resolved directory. Recorded in metadata, so that a file
// names its source whatever directory it is read from.
std::string absolute_path(const std::string &path);

// Throws (exit 3) unless `path` names a readable, non-empty regular file.
void check_input_file(const std::string &path, const std::string &what);

// Where an output goes. A new name or an existing regular file gets the atomic write (temporary file
// + rename; a symbolic link to a regular file stays a link and its file is replaced); a character
// device or FIFO (/dev/null, a terminal, a pipe), and any existing path under /dev or /proc
// (/dev/stdout), is written in place and never replaced or removed; a directory, block device or
// socket is refused (exit 2).
enum class OutputTarget { new_file, regular, in_place, refused };
OutputTarget output_target(const std::string &dst);

// Throws (exit 2/3) unless `dst` can be created: its directory exists and is writable,
// it is not a directory, and it is not the same file as any of `inputs`.
void check_output_path(const std::string &dst, const std::vector<std::string> &inputs);

// The one error for an output that cannot be written, whoever writes it: exit 2,
// "cannot write 'DST': REASON".
[[noreturn]] void throw_write_failed(const std::string &dst, const std::string &reason);

// A writer's temporary file: every failed write or close throws throw_write_failed with the
// system's reason (disk full, quota, I/O error).
class OutputFile {
public:
    OutputFile(const std::string &tmp, const std::string &dst);
    ~OutputFile();
    OutputFile(const OutputFile &) = delete;
    OutputFile &operator=(const OutputFile &) = delete;
    void write(const void *data, size_t bytes);
    void write(const std::string &text) { write(text.data(), text.size()); }
    void close();

private:
    int fd_ = -1;
    std::string dst_;
};

// Calls writer(tmp) with a fresh temporary path in dst's directory, then renames tmp
// to dst. On any exception (or SIGINT/SIGTERM) the temporary file is removed. An in-place target
// (output_target) is passed to the writer as it is.
void write_atomically(const std::string &dst,
                      const std::function<void(const std::string &tmp)> &writer);

// Convenience: write text ("-" means stdout, written directly and checked).
void write_text_atomically(const std::string &dst, const std::string &text);

}  // namespace ipex
