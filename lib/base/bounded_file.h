// The one reader of small whole files (configs, indexes, tokenizers, qconfigs, recipes, prompts):
// the size is checked before anything is read, so a huge or endless input costs no memory.
// Torch-free.
#pragma once

#include <cstdint>
#include <string>

namespace ipex {

// Sizes of files as a person reads them: "512 B", "64 MiB", "5.0 GiB".
std::string format_bytes(uint64_t bytes);

// The size of the file at `path` in bytes; 0 where it cannot be read (a report's figure, not a check).
uint64_t file_size(const std::string &path);

// The whole content of `path`, at most `limit` bytes. `what` names the file's role in messages
// ("checkpoint index", "tokenizer.json"). Exit 3 when the path does not exist, is a directory,
// cannot be read, or holds more than `limit` bytes: the message names the file, its size and the
// limit. A regular file's size is checked before the read; a pipe or character device (/dev/stdin,
// a FIFO) is read up to limit + 1 bytes and refused past the limit.
std::string read_bounded_file(const std::string &path, uint64_t limit, const std::string &what);

}  // namespace ipex
