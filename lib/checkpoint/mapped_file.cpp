#include "checkpoint/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/atomic_file.h"
#include "base/errors.h"

namespace ipex::woq {

MappedFile::MappedFile(const std::string &path, const std::string &what) {
    check_input_file(path, what);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw_bad_input(what + " '" + path + "': " + std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0 || st.st_size <= 0) {
        ::close(fd);
        throw_bad_input(what + " '" + path + "' cannot be read (empty or unreadable)");
    }
    size_ = static_cast<size_t>(st.st_size);
    void *map = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) throw_bad_input(what + " '" + path + "': mmap failed: " + std::strerror(errno));
    data_ = static_cast<const uint8_t *>(map);
}

MappedFile::~MappedFile() {
    if (data_) munmap(const_cast<uint8_t *>(data_), size_);
}

void release_mapped_pages(const void *p, size_t n) {
    static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
    if (end > begin) ::madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED);
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14
#endif

void populate_mapped_pages(const void *p, size_t n) {
    static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n + page - 1) / page * page;
    if (end > begin) ::madvise(reinterpret_cast<void *>(begin), end - begin, MADV_POPULATE_READ);  // a hint: errors ignored
}

}  // namespace ipex::woq
