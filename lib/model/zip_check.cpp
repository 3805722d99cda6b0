#include "model/zip_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "base/errors.h"

namespace ipex::model {
namespace {

constexpr uint32_t kLocalHeaderSig = 0x04034b50, kDirectoryEntrySig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50, kEnd64LocatorSig = 0x07064b50, kEnd64Sig = 0x06064b50;
constexpr size_t kEndSize = 22, kEnd64LocatorSize = 20, kEnd64Size = 56, kEntrySize = 46, kLocalSize = 30;
constexpr size_t kMaxComment = 0xffff;
// A directory this large (hundreds of thousands of records) is not an archive torch.jit.save
// wrote; the bound keeps a damaged size field from deciding an allocation.
constexpr uint64_t kMaxDirectoryBytes = uint64_t{256} << 20;
constexpr size_t kChunk = size_t{1} << 20;

uint16_t le16(const unsigned char *p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
uint32_t le32(const unsigned char *p) { return le16(p) | static_cast<uint32_t>(le16(p + 2)) << 16; }
uint64_t le64(const unsigned char *p) { return le32(p) | static_cast<uint64_t>(le32(p + 4)) << 32; }

class File {
public:
    explicit File(const std::string &path) : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
        struct stat st {};
        if (fd_ < 0 || ::fstat(fd_, &st) != 0)
            throw_bad_input("'" + path + "' cannot be read: " + std::strerror(errno));
        size_ = static_cast<uint64_t>(st.st_size);
    }
    ~File() {
        if (fd_ >= 0) ::close(fd_);
    }
    File(const File &) = delete;
    File &operator=(const File &) = delete;

    uint64_t size() const { return size_; }
    // Exactly n bytes at offset, or false when the file ends first.
    bool read(uint64_t offset, void *out, size_t n) const {
        if (offset > size_ || n > size_ - offset) return false;
        auto *dst = static_cast<unsigned char *>(out);
        while (n > 0) {
            const ssize_t got = ::pread(fd_, dst, n, static_cast<off_t>(offset));
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) throw_bad_input("'" + path_ + "' cannot be read: " + std::strerror(errno));
            if (got == 0) return false;
            dst += got;
            offset += static_cast<uint64_t>(got);
            n -= static_cast<size_t>(got);
        }
        return true;
    }

private:
    std::string path_;
    int fd_;
    uint64_t size_ = 0;
};

[[noreturn]] void damaged_zip(const std::string &path, const std::string &why) {
    throw_bad_input("'" + path + "' is a damaged zip archive: " + why);
}

[[noreturn]] void damaged_record(const std::string &path, const ZipRecord &r, const std::string &why) {
    throw_bad_input("'" + path + "' is a damaged TorchScript archive: record '" + r.name + "' " + why +
                    "; the file changed after it was written (copy or export it again)");
}

struct Directory {
    uint64_t entries = 0, offset = 0, bytes = 0;
};

Directory find_directory(const File &f, const std::string &path) {
    const uint64_t tail_size = std::min<uint64_t>(f.size(), kEndSize + kMaxComment);
    std::vector<unsigned char> tail(tail_size);
    const uint64_t tail_start = f.size() - tail_size;
    if (tail_size < kEndSize || !f.read(tail_start, tail.data(), tail.size()))
        damaged_zip(path, "no end-of-directory record");
    for (size_t pos = tail_size - kEndSize + 1; pos-- > 0;) {
        const unsigned char *e = tail.data() + pos;
        if (le32(e) != kEndSig || pos + kEndSize + le16(e + 20) > tail_size) continue;
        Directory d{le16(e + 10), le32(e + 16), le32(e + 12)};
        const uint64_t end_at = tail_start + pos;
        unsigned char loc[kEnd64LocatorSize];
        if (end_at >= kEnd64LocatorSize && f.read(end_at - kEnd64LocatorSize, loc, sizeof loc) &&
            le32(loc) == kEnd64LocatorSig) {
            unsigned char e64[kEnd64Size];
            if (!f.read(le64(loc + 8), e64, sizeof e64) || le32(e64) != kEnd64Sig)
                damaged_zip(path, "its zip64 end-of-directory record is missing or damaged");
            d = Directory{le64(e64 + 32), le64(e64 + 48), le64(e64 + 40)};
        }
        if (d.offset > f.size() || d.bytes > f.size() - d.offset)
            damaged_zip(path, "its central directory lies past the end of the file");
        return d;
    }
    damaged_zip(path, "no end-of-directory record");
}

// The zip64 extended information extra field (id 1) replaces the 32-bit fields that hold
// 0xffffffff, in this order: size, compressed size, local header offset.
void apply_zip64(const unsigned char *extra, size_t n, ZipRecord *r, const std::string &path) {
    for (size_t at = 0; at + 4 <= n;) {
        const uint16_t id = le16(extra + at), len = le16(extra + at + 2);
        if (at + 4 + len > n) damaged_zip(path, "record '" + r->name + "' has a damaged extra field");
        if (id == 1) {
            const unsigned char *p = extra + at + 4, *end = p + len;
            for (uint64_t *field : {&r->size, &r->compressed, &r->local_header}) {
                if (*field != 0xffffffffu) continue;
                if (end - p < 8) damaged_zip(path, "record '" + r->name + "' has a damaged zip64 field");
                *field = le64(p);
                p += 8;
            }
            return;
        }
        at += 4 + len;
    }
}

// The bytes of the record's data, chunk by chunk, to `take` (false stops the walk).
template <class Take>
bool stream_data(const File &f, uint64_t offset, uint64_t n, std::vector<unsigned char> &buf, Take take) {
    while (n > 0) {
        const size_t k = static_cast<size_t>(std::min<uint64_t>(n, buf.size()));
        if (!f.read(offset, buf.data(), k)) return false;
        if (!take(buf.data(), k)) return true;
        offset += k;
        n -= k;
    }
    return true;
}

void check_record(const File &f, const std::string &path, const ZipRecord &r, std::vector<unsigned char> &buf,
                  std::vector<unsigned char> &out) {
    if (r.flags & 1) damaged_record(path, r, "is encrypted");
    unsigned char local[kLocalSize];
    if (!f.read(r.local_header, local, sizeof local) || le32(local) != kLocalHeaderSig)
        damaged_record(path, r, "has no local header where the directory says");
    const uint16_t name_len = le16(local + 26), extra_len = le16(local + 28);
    std::string local_name(name_len, '\0');
    if (!f.read(r.local_header + kLocalSize, local_name.data(), name_len) || local_name != r.name)
        damaged_record(path, r, "has a local header naming another record");
    const uint64_t data = r.local_header + kLocalSize + name_len + extra_len;
    if (data > f.size() || r.compressed > f.size() - data) damaged_record(path, r, "runs past the end of the file");

    uLong crc = crc32(0L, Z_NULL, 0);
    uint64_t produced = 0;
    if (r.method == 0) {
        if (r.compressed != r.size) damaged_record(path, r, "is stored with two different sizes");
        stream_data(f, data, r.compressed, buf, [&](const unsigned char *p, size_t k) {
            crc = crc32_z(crc, p, k);
            return true;
        });
        produced = r.size;
    } else if (r.method == 8) {
        z_stream z{};
        if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw std::bad_alloc();
        int status = Z_OK;
        bool too_long = false;
        stream_data(f, data, r.compressed, buf, [&](const unsigned char *p, size_t k) {
            z.next_in = const_cast<unsigned char *>(p);
            z.avail_in = static_cast<uInt>(k);
            do {
                z.next_out = out.data();
                z.avail_out = static_cast<uInt>(out.size());
                status = inflate(&z, Z_NO_FLUSH);
                if (status != Z_OK && status != Z_STREAM_END && status != Z_BUF_ERROR) return false;
                const size_t made = out.size() - z.avail_out;
                if (made > r.size - produced) {
                    too_long = true;
                    return false;
                }
                crc = crc32_z(crc, out.data(), made);
                produced += made;
            } while (z.avail_out == 0 && status != Z_STREAM_END);
            return status != Z_STREAM_END;  // Z_BUF_ERROR: this chunk is used up
        });
        inflateEnd(&z);
        if (too_long) damaged_record(path, r, "inflates past its recorded size");
        if (status != Z_STREAM_END) damaged_record(path, r, "has a damaged or truncated deflate stream");
    } else {
        damaged_record(path, r, "uses compression method " + std::to_string(r.method) +
                                    " (torch.jit.save stores or deflates records)");
    }
    if (produced != r.size) damaged_record(path, r, "is shorter than its recorded size");
    if (static_cast<uint32_t>(crc) != r.crc32) damaged_record(path, r, "does not match its CRC-32");
}

std::vector<ZipRecord> read_directory(const File &f, const std::string &path) {
    const Directory d = find_directory(f, path);
    if (d.bytes > kMaxDirectoryBytes) damaged_zip(path, "its central directory is larger than 256 MiB");
    if (d.entries > d.bytes / kEntrySize) damaged_zip(path, "its directory counts more records than it holds");
    std::vector<unsigned char> dir(static_cast<size_t>(d.bytes));
    if (!f.read(d.offset, dir.data(), dir.size())) damaged_zip(path, "its central directory cannot be read");
    std::vector<ZipRecord> records;
    records.reserve(static_cast<size_t>(d.entries));
    size_t at = 0;
    for (uint64_t i = 0; i < d.entries; ++i) {
        if (dir.size() - at < kEntrySize || le32(dir.data() + at) != kDirectoryEntrySig)
            damaged_zip(path, "directory entry " + std::to_string(i) + " is damaged");
        const unsigned char *e = dir.data() + at;
        const size_t name_len = le16(e + 28), extra_len = le16(e + 30), comment_len = le16(e + 32);
        if (dir.size() - at - kEntrySize < name_len + extra_len + comment_len)
            damaged_zip(path, "directory entry " + std::to_string(i) + " runs past the directory");
        ZipRecord r;
        r.name.assign(reinterpret_cast<const char *>(e + kEntrySize), name_len);
        r.flags = le16(e + 8);
        r.method = le16(e + 10);
        r.crc32 = le32(e + 16);
        r.compressed = le32(e + 20);
        r.size = le32(e + 24);
        r.local_header = le32(e + 42);
        apply_zip64(e + kEntrySize + name_len, extra_len, &r, path);
        records.push_back(std::move(r));
        at += kEntrySize + name_len + extra_len + comment_len;
    }
    return records;
}

}  // namespace

std::vector<ZipRecord> read_zip_directory(const std::string &path) { return read_directory(File(path), path); }

void check_zip_records(const std::string &path) {
    const File f(path);
    const std::vector<ZipRecord> records = read_directory(f, path);
    std::vector<unsigned char> buf(kChunk), out(kChunk);
    for (const ZipRecord &r : records) check_record(f, path, r, buf, out);
}

}  // namespace ipex::model
