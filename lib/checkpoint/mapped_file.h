// A whole file mapped read-only, for the checkpoint readers (safetensors, GGUF): their contents
// are untrusted and validated by the reader before use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ipex::woq {

// The whole pages inside [p, p + n) of a read-only file mapping leave the resident set: the
// page cache keeps them, and the next read of any byte there faults its page back in (so this
// is safe while views of those bytes live; it costs only that fault). A loader that copies
// tensor by tensor holds the mapping a tensor at a time.
void release_mapped_pages(const void *p, size_t n);
// The pages holding [p, p + n) of a read-only file mapping read in (from the page cache, or the
// disk) and mapped now, as MAP_POPULATE would, so that reading them later takes no page fault; a
// kernel without MADV_POPULATE_READ (before 5.14) leaves them to fault in when read.
void populate_mapped_pages(const void *p, size_t n);

class MappedFile {
public:
    // Exit 3 naming `what` ("checkpoint file", "GGUF file") and the path when the file is
    // missing, a directory, empty, unreadable or cannot be mapped.
    MappedFile(const std::string &path, const std::string &what);
    ~MappedFile();
    MappedFile(const MappedFile &) = delete;
    MappedFile &operator=(const MappedFile &) = delete;

    const uint8_t *data() const { return data_; }
    size_t size() const { return size_; }

private:
    const uint8_t *data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace ipex::woq
