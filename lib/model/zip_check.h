// The integrity of a zip archive (what torch.jit.save writes): every record's bytes against the
// CRC-32 and sizes its central directory records. libtorch's reader checks neither, so a file
// changed after it was written loads with damaged weights, or hands damaged TorchScript source
// to a compiler that is not safe on it. Streams each record (stored or deflated) through a
// fixed buffer: sizes written in the file never decide an allocation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ipex::model {

struct ZipRecord {
    std::string name;
    uint16_t flags = 0, method = 0;  // method 0 stored, 8 deflated
    uint32_t crc32 = 0;
    uint64_t compressed = 0, size = 0, local_header = 0;
};

// The central directory of the zip file at `path` (zip64 included). Throws ipex::Error
// (bad input, naming the file) on a file it cannot read as a zip.
std::vector<ZipRecord> read_zip_directory(const std::string &path);

// Reads every record of the archive and compares it with its directory entry. Throws
// ipex::Error (bad input) naming the file and the first damaged record.
void check_zip_records(const std::string &path);

}  // namespace ipex::model
