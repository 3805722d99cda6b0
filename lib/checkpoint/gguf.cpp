#include "checkpoint/gguf.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstring>

#include "base/errors.h"
#include "checkpoint/gguf_woq.h"

namespace ipex::woq {
namespace {

constexpr uint32_t kMaxArrayDepth = 2;  // an array of arrays at most (the format allows nesting)

enum ValueType : uint32_t {
    u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7, string = 8, array = 9, u64 = 10,
    i64 = 11, f64 = 12,
};

// Reads little-endian values from [pos, size), every read checked against what remains.
class Cursor {
public:
    Cursor(const uint8_t *data, size_t size, const std::string &name) : data_(data), size_(size), name_(name) {}

    [[noreturn]] void fail(const std::string &what) const {
        throw_bad_input("GGUF file '" + name_ + "': " + what + " (at byte " + std::to_string(pos_) + ")");
    }
    size_t pos() const { return pos_; }
    size_t remaining() const { return size_ - pos_; }
    const uint8_t *take(size_t n, const char *what) {
        if (n > remaining()) fail(std::string("truncated ") + what);
        const uint8_t *p = data_ + pos_;
        pos_ += n;
        return p;
    }
    template <class T>
    T read(const char *what) {
        T v;
        std::memcpy(&v, take(sizeof(T), what), sizeof(T));
        return v;
    }
    std::string string(const char *what) {
        const uint64_t n = read<uint64_t>(what);
        if (n > kMaxGgufString) fail(std::string(what) + " of " + std::to_string(n) + " bytes is longer than the limit");
        const uint8_t *p = take(static_cast<size_t>(n), what);
        return std::string(reinterpret_cast<const char *>(p), static_cast<size_t>(n));
    }

private:
    const uint8_t *data_;
    size_t size_;
    size_t pos_ = 0;
    std::string name_;
};

// The smallest number of bytes one value of `type` takes (arrays: their own header).
uint64_t min_value_bytes(uint32_t type) {
    switch (type) {
    case u8: case i8: case boolean: return 1;
    case u16: case i16: return 2;
    case u32: case i32: case f32: return 4;
    case string: case u64: case i64: case f64: return 8;
    case array: return 12;
    default: return 0;
    }
}

nlohmann::json read_value(Cursor &c, uint32_t type, uint32_t depth, uint64_t &items, const std::string &key) {
    if (++items > kMaxGgufMetadataItems) c.fail("metadata holds more than " + std::to_string(kMaxGgufMetadataItems) + " values");
    switch (type) {
    case u8: return c.read<uint8_t>("u8 value");
    case i8: return c.read<int8_t>("i8 value");
    case u16: return c.read<uint16_t>("u16 value");
    case i16: return c.read<int16_t>("i16 value");
    case u32: return c.read<uint32_t>("u32 value");
    case i32: return c.read<int32_t>("i32 value");
    case u64: return c.read<uint64_t>("u64 value");
    case i64: return c.read<int64_t>("i64 value");
    case f32: return static_cast<double>(c.read<float>("f32 value"));
    case f64: return c.read<double>("f64 value");
    case boolean: {
        const uint8_t b = c.read<uint8_t>("bool value");
        if (b > 1) c.fail("metadata '" + key + "': a bool of value " + std::to_string(b));
        return b == 1;
    }
    case string: {
        std::string s = c.string("string value");
        // Kept as bytes: nlohmann::json's dump checks UTF-8, so invalid text is replaced when shown.
        return s;
    }
    case array: {
        if (depth >= kMaxArrayDepth) c.fail("metadata '" + key + "': arrays nested deeper than " + std::to_string(kMaxArrayDepth));
        const uint32_t elem = c.read<uint32_t>("array type");
        const uint64_t count = c.read<uint64_t>("array length");
        const uint64_t least = min_value_bytes(elem);
        if (least == 0) c.fail("metadata '" + key + "': array of unknown value type " + std::to_string(elem));
        if (count > kMaxGgufArray || count > c.remaining() / least)
            c.fail("metadata '" + key + "': array of " + std::to_string(count) + " values does not fit in the file");
        nlohmann::json out = nlohmann::json::array();
        for (uint64_t i = 0; i < count; ++i) out.push_back(read_value(c, elem, depth + 1, items, key));
        return out;
    }
    default: c.fail("metadata '" + key + "' has unknown value type " + std::to_string(type));
    }
}

float half_to_float(const uint8_t *p) {
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    return static_cast<float>(c10::Half(bits, c10::Half::from_bits()));
}

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j from the 12 packed bytes.
void scale_min_k4(int j, const uint8_t *q, uint8_t &d, uint8_t &m) {
    if (j < 4) {
        d = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

void dequantize_block(uint32_t type, const uint8_t *b, float *y) {
    switch (static_cast<GgmlType>(type)) {
    case GgmlType::q4_0: {  // d, 16 bytes: element j low nibble, j + 16 high; value (q - 8) d
        const float d = half_to_float(b);
        for (int j = 0; j < 16; ++j) {
            y[j] = static_cast<float>((b[2 + j] & 0xF) - 8) * d;
            y[j + 16] = static_cast<float>((b[2 + j] >> 4) - 8) * d;
        }
        return;
    }
    case GgmlType::q4_1: {  // d, m, 16 bytes; value q d + m
        const float d = half_to_float(b), m = half_to_float(b + 2);
        for (int j = 0; j < 16; ++j) {
            y[j] = static_cast<float>(b[4 + j] & 0xF) * d + m;
            y[j + 16] = static_cast<float>(b[4 + j] >> 4) * d + m;
        }
        return;
    }
    case GgmlType::q5_0:
    case GgmlType::q5_1: {  // d (, m), 32 high bits, 16 bytes of low nibbles
        const bool with_min = static_cast<GgmlType>(type) == GgmlType::q5_1;
        const float d = half_to_float(b), m = with_min ? half_to_float(b + 2) : 0.f;
        const uint8_t *qhp = b + (with_min ? 4 : 2), *qs = qhp + 4;
        uint32_t qh;
        std::memcpy(&qh, qhp, 4);
        for (int j = 0; j < 16; ++j) {
            const int h0 = static_cast<int>(((qh >> j) << 4) & 0x10), h1 = static_cast<int>((qh >> (j + 12)) & 0x10);
            const int x0 = (qs[j] & 0xF) | h0, x1 = (qs[j] >> 4) | h1;
            y[j] = with_min ? static_cast<float>(x0) * d + m : static_cast<float>(x0 - 16) * d;
            y[j + 16] = with_min ? static_cast<float>(x1) * d + m : static_cast<float>(x1 - 16) * d;
        }
        return;
    }
    case GgmlType::q8_0: {  // d, 32 int8
        const float d = half_to_float(b);
        for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
        return;
    }
    case GgmlType::q4_k:
    case GgmlType::q5_k: {  // d, dmin, 12 bytes of 6-bit scales/mins, (32 bytes of high bits,) 128 nibbles
        const bool five = static_cast<GgmlType>(type) == GgmlType::q5_k;
        const float d = half_to_float(b), dmin = half_to_float(b + 2);
        const uint8_t *scales = b + 4, *qh = b + 16, *q = b + (five ? 48 : 16);
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0, is = 0; j < 256; j += 64, is += 2) {
            uint8_t sc, m;
            scale_min_k4(is, scales, sc, m);
            const float d1 = d * sc, m1 = dmin * m;
            scale_min_k4(is + 1, scales, sc, m);
            const float d2 = d * sc, m2 = dmin * m;
            for (int l = 0; l < 32; ++l) {
                const int high = five && (qh[l] & u1) ? 16 : 0;
                y[j + l] = d1 * static_cast<float>((q[l] & 0xF) + high) - m1;
            }
            for (int l = 0; l < 32; ++l) {
                const int high = five && (qh[l] & u2) ? 16 : 0;
                y[j + 32 + l] = d2 * static_cast<float>((q[l] >> 4) + high) - m2;
            }
            q += 32;
            u1 = static_cast<uint8_t>(u1 << 2);
            u2 = static_cast<uint8_t>(u2 << 2);
        }
        return;
    }
    case GgmlType::q6_k: {  // 128 bytes low nibbles, 64 bytes high bit pairs, 16 int8 scales, d
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t *sc = reinterpret_cast<const int8_t *>(b + 192);
        const float d = half_to_float(b + 208);
        for (int n = 0; n < 256; n += 128) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[n + l] = d * sc[is] * static_cast<float>(q1);
                y[n + l + 32] = d * sc[is + 2] * static_cast<float>(q2);
                y[n + l + 64] = d * sc[is + 4] * static_cast<float>(q3);
                y[n + l + 96] = d * sc[is + 6] * static_cast<float>(q4);
            }
            ql += 64;
            qh += 32;
            sc += 8;
        }
        return;
    }
    default: break;
    }
    throw_unsupported("GGUF tensor type " + ggml_type_name(type) + " cannot be dequantized");
}

}  // namespace

bool ggml_type_layout(uint32_t type, uint64_t &block_elements, uint64_t &block_bytes) {
    switch (static_cast<GgmlType>(type)) {
    case GgmlType::f32: case GgmlType::i32: block_elements = 1; block_bytes = 4; return true;
    case GgmlType::f16: case GgmlType::bf16: case GgmlType::i16: block_elements = 1; block_bytes = 2; return true;
    case GgmlType::i8: block_elements = 1; block_bytes = 1; return true;
    case GgmlType::i64: case GgmlType::f64: block_elements = 1; block_bytes = 8; return true;
    case GgmlType::q4_0: block_elements = 32; block_bytes = 18; return true;
    case GgmlType::q4_1: block_elements = 32; block_bytes = 20; return true;
    case GgmlType::q5_0: block_elements = 32; block_bytes = 22; return true;
    case GgmlType::q5_1: block_elements = 32; block_bytes = 24; return true;
    case GgmlType::q8_0: block_elements = 32; block_bytes = 34; return true;
    case GgmlType::q8_1: block_elements = 32; block_bytes = 36; return true;
    case GgmlType::q2_k: block_elements = 256; block_bytes = 84; return true;
    case GgmlType::q3_k: block_elements = 256; block_bytes = 110; return true;
    case GgmlType::q4_k: block_elements = 256; block_bytes = 144; return true;
    case GgmlType::q5_k: block_elements = 256; block_bytes = 176; return true;
    case GgmlType::q6_k: block_elements = 256; block_bytes = 210; return true;
    case GgmlType::q8_k: block_elements = 256; block_bytes = 292; return true;
    }
    return false;
}

std::string ggml_type_name(uint32_t type) {
    static const std::map<uint32_t, const char *> names = {
        {0, "f32"}, {1, "f16"}, {2, "q4_0"}, {3, "q4_1"}, {6, "q5_0"}, {7, "q5_1"}, {8, "q8_0"}, {9, "q8_1"},
        {10, "q2_K"}, {11, "q3_K"}, {12, "q4_K"}, {13, "q5_K"}, {14, "q6_K"}, {15, "q8_K"}, {24, "i8"},
        {25, "i16"}, {26, "i32"}, {27, "i64"}, {28, "f64"}, {30, "bf16"}};
    const auto it = names.find(type);
    return it == names.end() ? "type " + std::to_string(type) : it->second;
}

GgufHeader parse_gguf_header(const uint8_t *data, size_t size, const std::string &name) {
    Cursor c(data, size, name);
    const uint8_t *magic = c.take(4, "magic");
    if (std::memcmp(magic, "GGUF", 4) != 0) c.fail("not a GGUF file (no GGUF magic)");
    GgufHeader h;
    h.version = c.read<uint32_t>("version");
    if (h.version != 2 && h.version != 3)
        throw_unsupported("GGUF file '" + name + "' has version " + std::to_string(h.version) +
                          " (supported: 2 and 3)");
    const uint64_t tensors = c.read<uint64_t>("tensor count");
    const uint64_t kvs = c.read<uint64_t>("metadata count");
    if (tensors > kMaxGgufTensors) c.fail("tensor count " + std::to_string(tensors) + " is past the limit");
    if (kvs > kMaxGgufMetadata) c.fail("metadata count " + std::to_string(kvs) + " is past the limit");
    uint64_t items = 0;
    for (uint64_t i = 0; i < kvs; ++i) {
        const std::string key = c.string("metadata key");
        const uint32_t type = c.read<uint32_t>("metadata value type");
        if (h.metadata.contains(key)) c.fail("metadata key '" + key + "' appears twice");
        h.metadata[key] = read_value(c, type, 0, items, key);
        h.metadata_types[key] = type;
    }
    if (h.metadata.contains("general.alignment")) {
        const auto &a = h.metadata["general.alignment"];
        if (h.metadata_types["general.alignment"] != u32 || a.get<uint64_t>() == 0 ||
            (a.get<uint64_t>() & (a.get<uint64_t>() - 1)) != 0)
            c.fail("general.alignment must be a u32 power of two");
        h.alignment = a.get<uint64_t>();
    }
    std::map<std::string, size_t> seen;
    for (uint64_t i = 0; i < tensors; ++i) {
        GgufTensorInfo t;
        t.name = c.string("tensor name");
        if (seen.count(t.name)) c.fail("tensor '" + t.name + "' appears twice");
        const uint32_t rank = c.read<uint32_t>("tensor rank");
        if (rank == 0 || rank > kMaxGgufRank) c.fail("tensor '" + t.name + "' has rank " + std::to_string(rank));
        uint64_t elements = 1;
        std::vector<int64_t> dims;
        for (uint32_t d = 0; d < rank; ++d) {
            const uint64_t n = c.read<uint64_t>("tensor dimension");
            if (n == 0 || n > (uint64_t(1) << 40) || elements > (uint64_t(1) << 50) / n)
                c.fail("tensor '" + t.name + "' has dimension " + std::to_string(n) + " (zero or too large)");
            elements *= n;
            dims.push_back(static_cast<int64_t>(n));
        }
        t.shape.assign(dims.rbegin(), dims.rend());
        t.type = c.read<uint32_t>("tensor type");
        uint64_t block_elements = 0, block_bytes = 0;
        if (!ggml_type_layout(t.type, block_elements, block_bytes))
            throw_unsupported("GGUF file '" + name + "': tensor '" + t.name + "' has " + ggml_type_name(t.type) +
                              ", which this reader does not know");
        if (static_cast<uint64_t>(dims[0]) % block_elements != 0)
            c.fail("tensor '" + t.name + "': its rows of " + std::to_string(dims[0]) + " are not whole blocks of " +
                   std::to_string(block_elements) + " (" + ggml_type_name(t.type) + ")");
        t.bytes = elements / block_elements * block_bytes;
        t.offset = c.read<uint64_t>("tensor offset");
        if (t.offset % h.alignment != 0)
            c.fail("tensor '" + t.name + "' starts at " + std::to_string(t.offset) + ", not a multiple of the alignment");
        seen[t.name] = h.tensors.size();
        h.tensors.push_back(std::move(t));
    }
    h.data_start = (c.pos() + h.alignment - 1) / h.alignment * h.alignment;
    if (h.data_start > size && !h.tensors.empty()) c.fail("the data section starts past the end of the file");
    const uint64_t data_size = size >= h.data_start ? size - h.data_start : 0;
    std::vector<const GgufTensorInfo *> order;
    for (const auto &t : h.tensors) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](auto *a, auto *b) { return a->offset < b->offset; });
    uint64_t end = 0;
    for (const GgufTensorInfo *t : order) {
        if (t->offset < end) c.fail("tensor '" + t->name + "' overlaps the tensor before it");
        if (t->offset > data_size || t->bytes > data_size - t->offset)
            c.fail("tensor '" + t->name + "' (" + std::to_string(t->bytes) + " bytes at " + std::to_string(t->offset) +
                   ") reaches past the end of the file");
        end = t->offset + t->bytes;
    }
    return h;
}

void dequantize_ggml(uint32_t type, const uint8_t *src, uint64_t count, float *dst) {
    uint64_t block_elements = 0, block_bytes = 0;
    if (!ggml_type_layout(type, block_elements, block_bytes))
        throw_unsupported("GGUF tensor type " + ggml_type_name(type) + " is unknown");
    const int64_t blocks = static_cast<int64_t>(count / block_elements);
    switch (static_cast<GgmlType>(type)) {
    case GgmlType::q4_0: case GgmlType::q4_1: case GgmlType::q5_0: case GgmlType::q5_1: case GgmlType::q8_0:
    case GgmlType::q4_k: case GgmlType::q5_k: case GgmlType::q6_k: break;
    case GgmlType::f32: case GgmlType::f16: case GgmlType::bf16: break;
    default: throw_unsupported("GGUF tensor type " + ggml_type_name(type) + " is not read as weights (supported: f32, "
                               "f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K)");
    }
    switch (static_cast<GgmlType>(type)) {
    case GgmlType::f32: std::memcpy(dst, src, count * 4); return;
    case GgmlType::f16:
        for (uint64_t i = 0; i < count; ++i) dst[i] = half_to_float(src + 2 * i);
        return;
    case GgmlType::bf16:
        for (uint64_t i = 0; i < count; ++i) {
            uint16_t bits;
            std::memcpy(&bits, src + 2 * i, 2);
            dst[i] = static_cast<float>(c10::BFloat16(bits, c10::BFloat16::from_bits()));
        }
        return;
    default: break;
    }
    at::parallel_for(0, blocks, 256, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b)
            dequantize_block(type, src + static_cast<uint64_t>(b) * block_bytes, dst + static_cast<uint64_t>(b) * block_elements);
    });
}

GgufFile::GgufFile(const std::string &path) : path_(path), map_(path, "GGUF file") {
    header_ = parse_gguf_header(map_.data(), map_.size(), path);
    for (size_t i = 0; i < header_.tensors.size(); ++i) index_[header_.tensors[i].name] = i;
}

const GgufTensorInfo *GgufFile::find(const std::string &name) const {
    const auto it = index_.find(name);
    return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

const GgufTensorInfo &GgufFile::slice(const std::string &name, int64_t index, uint64_t &offset, uint64_t &bytes,
                                      std::vector<int64_t> &shape) const {
    const GgufTensorInfo *t = find(name);
    if (!t) throw_bad_input("GGUF file '" + path_ + "' has no tensor '" + name + "'");
    if (index < 0) {
        offset = 0;
        bytes = t->bytes;
        shape = t->shape;
        return *t;
    }
    if (t->shape.size() < 2 || index >= t->shape[0])
        throw_bad_input("GGUF file '" + path_ + "': tensor '" + name + "' has no slice " + std::to_string(index));
    uint64_t block_elements = 0, block_bytes = 0;
    ggml_type_layout(t->type, block_elements, block_bytes);
    shape.assign(t->shape.begin() + 1, t->shape.end());
    uint64_t elements = 1;
    for (int64_t d : shape) elements *= static_cast<uint64_t>(d);
    if (block_elements == 0 || elements % block_elements != 0)
        throw_bad_input("GGUF file '" + path_ + "': tensor '" + name + "' is not sliced on whole blocks");
    bytes = elements / block_elements * block_bytes;
    offset = static_cast<uint64_t>(index) * bytes;
    return *t;
}

at::Tensor GgufFile::tensor(const std::string &name) const { return tensor(name, -1); }

at::Tensor GgufFile::tensor(const std::string &name, int64_t index) const {
    uint64_t offset = 0, bytes = 0;
    std::vector<int64_t> shape;
    const GgufTensorInfo &t = slice(name, index, offset, bytes, shape);
    return read(t, offset, bytes, shape);
}

std::optional<WoqLayer> GgufFile::woq_layer(const std::string &name, int64_t index, const std::string &layer,
                                            const std::vector<int64_t> *row_order) const {
    uint64_t offset = 0, bytes = 0;
    std::vector<int64_t> shape;
    const GgufTensorInfo &t = slice(name, index, offset, bytes, shape);
    if (!ggml_woq_held(t.type) || shape.size() != 2)
        throw_bad_input("GGUF file '" + path_ + "': tensor '" + name + "' (" + ggml_type_name(t.type) + ", rank " +
                        std::to_string(shape.size()) + ") is not a q4_0, q4_1, q8_0, q4_K, q5_K or q6_K matrix");
    const uint8_t *src = map_.data() + header_.data_start + t.offset + offset;
    std::optional<WoqLayer> out = ggml_to_woq(layer, t.type, src, shape[0], shape[1], row_order);
    release_mapped_pages(src, bytes);
    return out;
}

at::Tensor GgufFile::read(const GgufTensorInfo &t, uint64_t offset, uint64_t bytes,
                          const std::vector<int64_t> &shape) const {
    const uint8_t *src = map_.data() + header_.data_start + t.offset + offset;
    const auto type = static_cast<GgmlType>(t.type);
    if (type == GgmlType::f16 || type == GgmlType::bf16 || type == GgmlType::f32) {
        at::Tensor out = at::empty(shape, type == GgmlType::f32 ? at::kFloat : type == GgmlType::f16 ? at::kHalf : at::kBFloat16);
        std::memcpy(out.data_ptr(), src, bytes);
        release_mapped_pages(src, bytes);
        return out;
    }
    at::Tensor out = at::empty(shape, at::kFloat);
    dequantize_ggml(t.type, src, static_cast<uint64_t>(out.numel()), out.data_ptr<float>());
    release_mapped_pages(src, bytes);
    return out;
}

}  // namespace ipex::woq
