#include "core/tensor_spec.h"

#include <ATen/ATen.h>
#include <sys/stat.h>
#include <torch/serialize.h>

#include <cctype>
#include <fstream>
#include <sstream>

#include "base/atomic_file.h"
#include "base/errors.h"
#include "core/npy.h"

namespace ipex {
namespace {

bool ends_with(const std::string &s, const std::string &suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

at::ScalarType parse_dtype(const std::string &name, const std::string &spec) {
    struct Entry {
        const char *name;
        at::ScalarType type;
    };
    static const Entry table[] = {
        {"fp32", at::kFloat},    {"float32", at::kFloat}, {"bf16", at::kBFloat16},
        {"bfloat16", at::kBFloat16}, {"fp16", at::kHalf}, {"float16", at::kHalf},
        {"fp64", at::kDouble},   {"float64", at::kDouble}, {"int64", at::kLong},
        {"int32", at::kInt},     {"bool", at::kBool},
    };
    for (const auto &e : table)
        if (name == e.name) return e.type;
    throw_usage("input SPEC '" + spec + "': unknown dtype '" + name +
                "' (use fp32, bf16, fp16, fp64, int64, int32 or bool)");
}

void flatten_into(const c10::IValue &value, const std::string &path,
                  std::vector<c10::IValue> &out, bool top) {
    if (value.isTensor()) {
        out.push_back(value);
    } else if (top && (value.isTuple() || value.isList())) {
        auto elements = value.isTuple() ? value.toTupleRef().elements().vec()
                                        : value.toListRef().vec();
        for (const auto &e : elements) {
            if (!e.isTensor())
                throw_bad_input("'" + path + "' holds a " + e.tagKind() +
                                " inside its tuple/list; expected tensors");
            out.push_back(e);
        }
    } else {
        throw_bad_input("'" + path + "' holds a " + value.tagKind() +
                        "; expected a tensor or a tuple/list of tensors saved by torch.save");
    }
}

}  // namespace

bool is_shape_spec(const std::string &text) {
    if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
    const std::string shape = text.substr(0, text.find(':'));
    for (char c : shape)
        if (!std::isdigit(static_cast<unsigned char>(c)) && c != 'x') return false;
    struct stat st {};
    return stat(text.c_str(), &st) != 0;  // an existing file named like a shape is a file
}

ShapeSpec parse_shape_spec(const std::string &text) {
    ShapeSpec spec;
    std::string shape = text;
    std::string rest;
    if (auto colon = text.find(':'); colon != std::string::npos) {
        shape = text.substr(0, colon);
        rest = text.substr(colon + 1);
    }
    std::stringstream ss(shape);
    std::string dim;
    int64_t numel = 1;
    while (std::getline(ss, dim, 'x')) {
        if (dim.empty() || dim.size() > 10 ||
            dim.find_first_not_of("0123456789") != std::string::npos)
            throw_usage("input SPEC '" + text +
                        "' is malformed: expected dimensions like 16x3x224x224");
        const int64_t v = std::stoll(dim);
        if (v <= 0) throw_usage("input SPEC '" + text + "': dimensions must be positive");
        if (numel > kMaxSpecElements / v)
            throw_usage("input SPEC '" + text + "' is too large (over 2^32 elements)");
        numel *= v;
        spec.sizes.push_back(v);
    }
    if (spec.sizes.empty() || shape.back() == 'x')
        throw_usage("input SPEC '" + text +
                    "' is malformed: expected dimensions like 16x3x224x224");
    if (text.find(':') != std::string::npos && rest.empty())
        throw_usage("input SPEC '" + text + "' ends with ':'; give a dtype like " + shape + ":bf16");
    if (!rest.empty()) {
        std::string dtype = rest;
        if (auto colon = rest.find(':'); colon != std::string::npos) {
            dtype = rest.substr(0, colon);
            const std::string high = rest.substr(colon + 1);
            if (high.empty() || high.size() > 18 ||
                high.find_first_not_of("0123456789") != std::string::npos ||
                std::stoll(high) <= 0)
                throw_usage("input SPEC '" + text + "': '" + high +
                            "' is not a positive integer upper bound");
            spec.high = std::stoll(high);
        }
        spec.dtype = parse_dtype(dtype, text);
        if (spec.high != 100 && at::isFloatingType(spec.dtype))
            throw_usage("input SPEC '" + text + "': an upper bound applies to integer dtypes only");
    }
    return spec;
}

std::vector<c10::IValue> load_tensor_file(const std::string &path) {
    check_input_file(path, "input file");
    std::vector<c10::IValue> out;
    if (ends_with(path, ".npy")) {
        out.emplace_back(load_npy(path));
        return out;
    }
    std::ifstream in(path, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    c10::IValue value;
    try {
        value = torch::pickle_load(bytes);
    } catch (const c10::Error &e) {
        throw_bad_input("'" + path +
                        "' is not a tensor file saved by torch.save (or .npy): " +
                        e.what_without_backtrace());
    }
    flatten_into(value, path, out, true);
    return out;
}

std::vector<c10::IValue> make_inputs(const std::vector<std::string> &specs, uint64_t seed) {
    std::vector<c10::IValue> inputs;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    for (const auto &text : specs) {
        if (is_shape_spec(text)) {
            const ShapeSpec spec = parse_shape_spec(text);
            at::Tensor t;
            if (at::isFloatingType(spec.dtype)) {
                t = at::randn(spec.sizes, gen, at::TensorOptions().dtype(at::kFloat)).to(spec.dtype);
            } else if (spec.dtype == at::kBool) {
                t = at::randint(0, 2, spec.sizes, gen, at::TensorOptions().dtype(at::kLong)).to(at::kBool);
            } else {
                t = at::randint(0, spec.high, spec.sizes, gen, at::TensorOptions().dtype(spec.dtype));
            }
            inputs.emplace_back(t);
            continue;
        }
        struct stat st {};
        if (stat(text.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
            throw_usage("input SPEC '" + text +
                        "' is a directory; give a shape or one .pt/.npy file here");
        if (stat(text.c_str(), &st) != 0 && !ends_with(text, ".pt") && !ends_with(text, ".npy") &&
            text.find('/') == std::string::npos)
            throw_usage("input SPEC '" + text +
                        "' is neither a shape like 16x3x224x224[:bf16] nor an existing file");
        auto loaded = load_tensor_file(text);
        inputs.insert(inputs.end(), loaded.begin(), loaded.end());
    }
    return inputs;
}

std::vector<c10::IValue> clone_inputs(const std::vector<c10::IValue> &inputs) {
    std::vector<c10::IValue> out;
    out.reserve(inputs.size());
    for (const auto &v : inputs) out.emplace_back(v.isTensor() ? c10::IValue(v.toTensor().clone()) : v);
    return out;
}

std::string dtype_name(at::ScalarType type) {
    switch (type) {
    case at::kFloat: return "fp32";
    case at::kBFloat16: return "bf16";
    case at::kHalf: return "fp16";
    case at::kDouble: return "fp64";
    case at::kLong: return "int64";
    case at::kInt: return "int32";
    case at::kShort: return "int16";
    case at::kChar: return "int8";
    case at::kByte: return "uint8";
    case at::kBool: return "bool";
    default: return c10::toString(type);
    }
}

std::string describe_inputs(const std::vector<c10::IValue> &inputs) {
    std::string out;
    for (const auto &v : inputs) {
        if (!out.empty()) out += ",";
        if (!v.isTensor()) {
            out += v.tagKind();
            continue;
        }
        const auto &t = v.toTensor();
        out += format_sizes(t.sizes()) + ":" + dtype_name(t.scalar_type());
    }
    return out;
}

}  // namespace ipex
