#include "model/zip_check.h"

#include <gtest/gtest.h>
#include <torch/script.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "base/errors.h"

namespace fs = std::filesystem;

namespace {

struct TempDir {
    fs::path path = fs::temp_directory_path() / ("ipex-zip-" + std::to_string(::getpid()));
    TempDir() { fs::create_directories(path); }
    ~TempDir() { fs::remove_all(path); }
};

void put16(std::string &s, uint32_t v) {
    s += static_cast<char>(v & 0xff);
    s += static_cast<char>((v >> 8) & 0xff);
}
void put32(std::string &s, uint32_t v) {
    put16(s, v & 0xffff);
    put16(s, v >> 16);
}
void put64(std::string &s, uint64_t v) {
    put32(s, static_cast<uint32_t>(v));
    put32(s, static_cast<uint32_t>(v >> 32));
}
void set32(std::string &s, size_t at, uint32_t v) {
    std::string b;
    put32(b, v);
    s.replace(at, 4, b);
}

std::string raw_deflate(const std::string &in) {
    z_stream z{};
    EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    std::string out(deflateBound(&z, in.size()), '\0');
    z.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(in.data()));
    z.avail_in = static_cast<uInt>(in.size());
    z.next_out = reinterpret_cast<Bytef *>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
    out.resize(z.total_out);
    deflateEnd(&z);
    return out;
}

struct Entry {
    std::string name, data;
    bool deflate = false;
};

// A zip written by hand: local headers and data, then the central directory (zip64 fields
// and end records when asked), then the end record with `comment`. Offsets of each local
// header and directory entry are kept for the tests that damage them.
struct Zip {
    std::string bytes;
    std::vector<size_t> local, entry;
};

Zip make_zip(const std::vector<Entry> &entries, bool zip64 = false, const std::string &comment = "") {
    Zip z;
    std::vector<std::string> stored;
    for (const Entry &e : entries) {
        stored.push_back(e.deflate ? raw_deflate(e.data) : e.data);
        z.local.push_back(z.bytes.size());
        put32(z.bytes, 0x04034b50);
        put16(z.bytes, 20);
        put16(z.bytes, 0);
        put16(z.bytes, e.deflate ? 8 : 0);
        put32(z.bytes, 0);
        put32(z.bytes, static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef *>(e.data.data()), e.data.size())));
        put32(z.bytes, static_cast<uint32_t>(stored.back().size()));
        put32(z.bytes, static_cast<uint32_t>(e.data.size()));
        put16(z.bytes, static_cast<uint32_t>(e.name.size()));
        put16(z.bytes, 0);
        z.bytes += e.name + stored.back();
    }
    const size_t dir = z.bytes.size();
    for (size_t i = 0; i < entries.size(); ++i) {
        const Entry &e = entries[i];
        z.entry.push_back(z.bytes.size());
        put32(z.bytes, 0x02014b50);
        put16(z.bytes, 20);
        put16(z.bytes, zip64 ? 45 : 20);
        put16(z.bytes, 0);
        put16(z.bytes, e.deflate ? 8 : 0);
        put32(z.bytes, 0);
        put32(z.bytes, static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef *>(e.data.data()), e.data.size())));
        put32(z.bytes, zip64 ? 0xffffffffu : static_cast<uint32_t>(stored[i].size()));
        put32(z.bytes, zip64 ? 0xffffffffu : static_cast<uint32_t>(e.data.size()));
        put16(z.bytes, static_cast<uint32_t>(e.name.size()));
        put16(z.bytes, zip64 ? 4 + 24 : 0);
        put16(z.bytes, 0);
        put16(z.bytes, 0);
        put16(z.bytes, 0);
        put32(z.bytes, 0);
        put32(z.bytes, zip64 ? 0xffffffffu : static_cast<uint32_t>(z.local[i]));
        z.bytes += e.name;
        if (zip64) {
            put16(z.bytes, 1);
            put16(z.bytes, 24);
            put64(z.bytes, e.data.size());
            put64(z.bytes, stored[i].size());
            put64(z.bytes, z.local[i]);
        }
    }
    const size_t dir_bytes = z.bytes.size() - dir;
    if (zip64) {
        const size_t end64 = z.bytes.size();
        put32(z.bytes, 0x06064b50);
        put64(z.bytes, 44);
        put16(z.bytes, 45);
        put16(z.bytes, 45);
        put32(z.bytes, 0);
        put32(z.bytes, 0);
        put64(z.bytes, entries.size());
        put64(z.bytes, entries.size());
        put64(z.bytes, dir_bytes);
        put64(z.bytes, dir);
        put32(z.bytes, 0x07064b50);
        put32(z.bytes, 0);
        put64(z.bytes, end64);
        put32(z.bytes, 1);
    }
    put32(z.bytes, 0x06054b50);
    put16(z.bytes, 0);
    put16(z.bytes, 0);
    put16(z.bytes, zip64 ? 0xffff : static_cast<uint32_t>(entries.size()));
    put16(z.bytes, zip64 ? 0xffff : static_cast<uint32_t>(entries.size()));
    put32(z.bytes, zip64 ? 0xffffffffu : static_cast<uint32_t>(dir_bytes));
    put32(z.bytes, zip64 ? 0xffffffffu : static_cast<uint32_t>(dir));
    put16(z.bytes, static_cast<uint32_t>(comment.size()));
    z.bytes += comment;
    return z;
}

const std::vector<Entry> kEntries = {
    {"a/data.pkl", std::string(300, 'x') + "tail", false},
    {"a/code/m.py", "def forward(self, x):\n    return x\n" + std::string(2000, ' ') + "# end\n", true},
    {"a/data/0", std::string(64, '\x01'), false},
};

std::string write(const TempDir &dir, const std::string &name, const std::string &bytes) {
    const std::string path = (dir.path / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

// The bad-input message check_zip_records gives the file, or "" when it accepts it.
std::string check(const std::string &path) {
    try {
        ipex::model::check_zip_records(path);
    } catch (const ipex::Error &e) {
        EXPECT_EQ(e.code(), ipex::ExitCode::bad_input) << e.what();
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
        return e.what();
    }
    return "";
}

}  // namespace

TEST(ZipCheck, AcceptsWhatTorchSaves) {
    TempDir dir;
    torch::jit::Module m("Scale");
    m.register_parameter("w", torch::full({3}, 2.0), false);
    m.define("def forward(self, x):\n    return x * self.w\n");
    const std::string path = (dir.path / "m.pt").string();
    m.save(path);
    EXPECT_EQ(check(path), "");
    const auto records = ipex::model::read_zip_directory(path);
    bool pkl = false, deflated_code = false;
    for (const auto &r : records) {
        pkl |= r.name == "m/data.pkl";
        deflated_code |= r.name.find("/code/") != std::string::npos && r.method == 8;
    }
    EXPECT_TRUE(pkl);
    EXPECT_TRUE(deflated_code) << "torch.jit.save deflates code records";
}

TEST(ZipCheck, ReadsPlainAndZip64Directories) {
    TempDir dir;
    for (bool zip64 : {false, true}) {
        const Zip z = make_zip(kEntries, zip64, "a comment");
        const std::string path = write(dir, zip64 ? "z64.zip" : "z.zip", z.bytes);
        EXPECT_EQ(check(path), "") << "zip64 " << zip64;
        const auto records = ipex::model::read_zip_directory(path);
        ASSERT_EQ(records.size(), kEntries.size());
        for (size_t i = 0; i < records.size(); ++i) {
            EXPECT_EQ(records[i].name, kEntries[i].name);
            EXPECT_EQ(records[i].size, kEntries[i].data.size());
            EXPECT_EQ(records[i].local_header, z.local[i]);
            EXPECT_EQ(records[i].method, kEntries[i].deflate ? 8 : 0);
        }
    }
}

TEST(ZipCheck, NamesTheDamagedRecord) {
    TempDir dir;
    const Zip good = make_zip(kEntries);
    const size_t data0 = good.local[0] + 30 + kEntries[0].name.size();
    const size_t data1 = good.local[1] + 30 + kEntries[1].name.size();
    struct Case {
        const char *what;
        std::function<void(std::string &)> damage;
        std::string expected;
    };
    const std::vector<Case> cases = {
        {"stored byte", [&](std::string &b) { b[data0 + 5] ^= 0x20; },
         "record 'a/data.pkl' does not match its CRC-32"},
        {"deflated byte", [&](std::string &b) { b[data1 + 3] ^= 0x01; }, "record 'a/code/m.py'"},
        {"directory crc", [&](std::string &b) { b[good.entry[2] + 16] ^= 1; },
         "record 'a/data/0' does not match its CRC-32"},
        {"method", [&](std::string &b) { b[good.entry[2] + 10] = 12; }, "compression method 12"},
        {"encrypted", [&](std::string &b) { b[good.entry[0] + 8] |= 1; }, "is encrypted"},
        {"local name", [&](std::string &b) { b[good.local[2] + 30] = 'b'; }, "local header naming another record"},
        {"local offset", [&](std::string &b) { set32(b, good.entry[1] + 42, 7); }, "no local header"},
        {"stored sizes", [&](std::string &b) { set32(b, good.entry[0] + 24, 303); }, "two different sizes"},
        {"inflated longer", [&](std::string &b) { set32(b, good.entry[1] + 24, 100); }, "inflates past"},
        {"inflated shorter",
         [&](std::string &b) { set32(b, good.entry[1] + 24, static_cast<uint32_t>(kEntries[1].data.size() + 1)); },
         "shorter than its recorded size"},
        {"compressed cut", [&](std::string &b) { set32(b, good.entry[1] + 20, 10); }, "truncated deflate stream"},
        {"past the end", [&](std::string &b) { set32(b, good.entry[2] + 20, 1u << 30); },
         "runs past the end of the file"},
        {"count", [&](std::string &b) { b[b.size() - 12] = 9; }, "counts more records"},
        {"entry signature", [&](std::string &b) { b[good.entry[1]] = 'Q'; }, "directory entry 1 is damaged"},
        {"directory offset", [&](std::string &b) { set32(b, b.size() - 6, 1u << 30); }, "past the end of the file"},
    };
    for (const Case &c : cases) {
        std::string bytes = good.bytes;
        c.damage(bytes);
        const std::string msg = check(write(dir, "bad.zip", bytes));
        EXPECT_NE(msg.find(c.expected), std::string::npos) << c.what << ": " << msg;
    }
}

// Every prefix of a valid archive, and every single-byte change of its directory and end
// record: an answer each time (accepted or bad input), never a crash.
TEST(ZipCheck, TruncatedAndChangedFilesGiveAnAnswer) {
    TempDir dir;
    for (bool zip64 : {false, true}) {
        const Zip good = make_zip(kEntries, zip64);
        for (size_t n = 0; n < good.bytes.size(); ++n)
            EXPECT_NE(check(write(dir, "cut.zip", good.bytes.substr(0, n))), "") << "prefix of " << n;
        for (size_t at = good.entry[0]; at < good.bytes.size(); ++at) {
            std::string bytes = good.bytes;
            bytes[at] = static_cast<char>(bytes[at] ^ 0xa5);
            check(write(dir, "changed.zip", bytes));
        }
    }
}
