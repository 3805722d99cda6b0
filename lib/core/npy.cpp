#include "core/npy.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/atomic_file.h"
#include "base/errors.h"

namespace ipex {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kMaxHeaderLen = 1 << 16;
constexpr size_t kMaxDims = 16;

[[noreturn]] void fail(const std::string &name, const std::string &what) {
    throw_bad_input("'" + name + "' is not a valid .npy file: " + what);
}

// Finds `'key':` in the header dict and returns the position just after the colon.
size_t find_key(const std::string &header, const std::string &key, const std::string &name) {
    for (const char quote : {'\'', '"'}) {
        const std::string needle = std::string(1, quote) + key + quote;
        size_t pos = header.find(needle);
        if (pos == std::string::npos) continue;
        pos += needle.size();
        while (pos < header.size() && std::isspace(static_cast<unsigned char>(header[pos]))) ++pos;
        if (pos >= header.size() || header[pos] != ':') fail(name, "header key '" + key + "' has no value");
        return pos + 1;
    }
    fail(name, "header has no '" + key + "' field");
}

size_t skip_space(const std::string &s, size_t pos) {
    while (pos < s.size() && std::isspace(static_cast<unsigned char>(s[pos]))) ++pos;
    return pos;
}

std::string read_quoted(const std::string &header, size_t pos, const std::string &name) {
    pos = skip_space(header, pos);
    if (pos >= header.size() || (header[pos] != '\'' && header[pos] != '"'))
        fail(name, "'descr' is not a string (structured dtypes are not supported)");
    const char quote = header[pos];
    size_t end = header.find(quote, pos + 1);
    if (end == std::string::npos) fail(name, "unterminated string in header");
    return header.substr(pos + 1, end - pos - 1);
}

struct DtypeInfo {
    at::ScalarType type;
    size_t size;
    bool swap;
};

DtypeInfo parse_descr(const std::string &descr, const std::string &name) {
    if (descr.size() < 2) fail(name, "unsupported dtype '" + descr + "'");
    const char order = descr[0];
    if (order != '<' && order != '>' && order != '|' && order != '=')
        fail(name, "unsupported dtype '" + descr + "'");
    const std::string kind = descr.substr(1);
    struct Entry {
        const char *kind;
        at::ScalarType type;
        size_t size;
    };
    static const Entry table[] = {
        {"f4", at::kFloat, 4}, {"f8", at::kDouble, 8}, {"f2", at::kHalf, 2},
        {"i8", at::kLong, 8},  {"i4", at::kInt, 4},    {"i2", at::kShort, 2},
        {"i1", at::kChar, 1},  {"u1", at::kByte, 1},   {"b1", at::kBool, 1},
    };
    for (const auto &e : table) {
        if (kind == e.kind) return {e.type, e.size, order == '>' && e.size > 1};
    }
    fail(name, "unsupported dtype '" + descr +
                   "' (supported: f2 f4 f8 i1 i2 i4 i8 u1 b1)");
}

bool parse_fortran(const std::string &header, const std::string &name) {
    size_t pos = skip_space(header, find_key(header, "fortran_order", name));
    if (header.compare(pos, 4, "True") == 0) return true;
    if (header.compare(pos, 5, "False") == 0) return false;
    fail(name, "'fortran_order' is neither True nor False");
}

std::vector<int64_t> parse_shape(const std::string &header, const std::string &name) {
    size_t pos = skip_space(header, find_key(header, "shape", name));
    if (pos >= header.size() || header[pos] != '(') fail(name, "'shape' is not a tuple");
    size_t end = header.find(')', pos);
    if (end == std::string::npos) fail(name, "'shape' tuple is not closed");
    std::vector<int64_t> shape;
    size_t i = pos + 1;
    while (i < end) {
        i = skip_space(header, i);
        if (i >= end) break;
        if (!std::isdigit(static_cast<unsigned char>(header[i])))
            fail(name, "'shape' holds something that is not a non-negative integer");
        uint64_t v = 0;
        while (i < end && std::isdigit(static_cast<unsigned char>(header[i]))) {
            v = v * 10 + static_cast<uint64_t>(header[i] - '0');
            if (v > (uint64_t(1) << 40)) fail(name, "'shape' dimension is too large");
            ++i;
        }
        shape.push_back(static_cast<int64_t>(v));
        if (shape.size() > kMaxDims) fail(name, "'shape' has more than 16 dimensions");
        i = skip_space(header, i);
        if (i < end && header[i] == ',') ++i;
        else if (i < end) fail(name, "'shape' is malformed");
    }
    return shape;
}

}  // namespace

at::Tensor parse_npy(const std::string &bytes, const std::string &name) {
    if (bytes.size() < kMagicLen + 4 || std::memcmp(bytes.data(), kMagic, kMagicLen) != 0)
        fail(name, "missing the \\x93NUMPY magic");
    const auto major = static_cast<unsigned char>(bytes[6]);
    size_t header_len = 0;
    size_t header_start = 0;
    if (major == 1) {
        header_len = static_cast<unsigned char>(bytes[8]) |
                     (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
        header_start = 10;
    } else if (major == 2 || major == 3) {
        if (bytes.size() < 12) fail(name, "truncated header length");
        for (int i = 3; i >= 0; --i)
            header_len = (header_len << 8) | static_cast<unsigned char>(bytes[8 + i]);
        header_start = 12;
    } else {
        fail(name, "unsupported format version " + std::to_string(major));
    }
    if (header_len > kMaxHeaderLen) fail(name, "header length " + std::to_string(header_len) + " exceeds 64 KiB");
    if (header_start + header_len > bytes.size()) fail(name, "file is truncated inside the header");
    const std::string header = bytes.substr(header_start, header_len);
    const DtypeInfo dtype = parse_descr(read_quoted(header, find_key(header, "descr", name), name), name);
    const bool fortran = parse_fortran(header, name);
    const std::vector<int64_t> shape = parse_shape(header, name);

    uint64_t numel = 1;
    for (int64_t d : shape) {
        if (d != 0 && numel > kMaxNpyBytes / static_cast<uint64_t>(d))
            fail(name, "array is larger than 8 GiB");
        numel *= static_cast<uint64_t>(d);
    }
    const uint64_t payload = numel * dtype.size;
    if (payload > kMaxNpyBytes) fail(name, "array is larger than 8 GiB");
    const size_t data_start = header_start + header_len;
    if (bytes.size() - data_start < payload)
        fail(name, "file is truncated: header promises " + std::to_string(payload) +
                       " bytes of data, " + std::to_string(bytes.size() - data_start) +
                       " present");

    std::vector<int64_t> storage_shape = shape;
    if (fortran) std::reverse(storage_shape.begin(), storage_shape.end());
    at::Tensor out = at::empty(storage_shape, at::TensorOptions().dtype(dtype.type));
    if (payload > 0) std::memcpy(out.data_ptr(), bytes.data() + data_start, payload);
    if (dtype.swap) {
        auto *p = static_cast<unsigned char *>(out.data_ptr());
        for (uint64_t i = 0; i < numel; ++i) std::reverse(p + i * dtype.size, p + (i + 1) * dtype.size);
    }
    if (dtype.type == at::kBool) {
        // numpy bools are bytes 0/1; anything else would be undefined for torch.
        auto *p = static_cast<unsigned char *>(out.data_ptr());
        for (uint64_t i = 0; i < numel; ++i) p[i] = p[i] != 0;
    }
    if (fortran) {
        std::vector<int64_t> perm(shape.size());
        for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(perm.size() - 1 - i);
        out = out.permute(perm).contiguous();
    }
    return out;
}

at::Tensor load_npy(const std::string &path) {
    check_input_file(path, "input file");
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return parse_npy(ss.str(), path);
}

void save_npy(const std::string &path, const at::Tensor &t) {
    TORCH_CHECK(t.scalar_type() == at::kFloat, "save_npy: float32 only, got ", t.scalar_type());
    const at::Tensor data = t.contiguous();
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
    for (int64_t d = 0; d < data.dim(); ++d) header += std::to_string(data.size(d)) + (data.dim() == 1 ? "," : d + 1 < data.dim() ? ", " : "");
    header += "), }";
    // magic (6) + version (2) + length (2) + header, padded with spaces to a multiple of 64, '\n' last
    const size_t unpadded = kMagicLen + 4 + header.size() + 1;
    header.append((64 - unpadded % 64) % 64, ' ');
    header += '\n';
    const auto length = static_cast<uint16_t>(header.size());
    std::string prefix(kMagic, kMagicLen);
    prefix += std::string{'\x01', '\x00', static_cast<char>(length & 0xff), static_cast<char>(length >> 8)};
    write_atomically(path, [&](const std::string &tmp) {
        OutputFile out(tmp, path);
        out.write(prefix + header);
        out.write(data.data_ptr(), static_cast<size_t>(data.nbytes()));
        out.close();
    });
}

}  // namespace ipex
