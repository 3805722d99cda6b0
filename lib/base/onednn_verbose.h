// Parses oneDNN verbose output (ONEDNN_VERBOSE=1) into primitive kind x implementation
// counts and time. Reads oneDNN 2.x lines ("onednn_verbose,exec,cpu,convolution,
// brgconv:avx512_core_bf16,...,1.23") and 3.x lines ("onednn_verbose,[v1,][timestamp,]
// primitive,exec,cpu,convolution,brg_conv_fwd:avx512_core_amx,...,1.23"), and the older
// "dnnl_verbose," prefix.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ipex {

struct VerboseExec {
    std::string engine;  // cpu
    std::string kind;    // convolution, matmul, inner_product, reorder...
    std::string impl;    // brgconv:avx512_core_bf16
    std::string isa;     // avx512_core_bf16, or "" when the impl names none
    double ms = 0.0;
};

// One exec line, or nullopt for anything else (info lines, program output).
std::optional<VerboseExec> parse_verbose_line(const std::string &line);

// What the info lines say: "onednn_verbose,[v1,]info,oneDNN v2.6.3 (commit ...)" and
// "onednn_verbose,[v1,]info,cpu,isa:Intel AVX-512 with ...".
struct VerboseInfo {
    std::string version;  // "v2.6.3"
    std::string isa;      // "Intel AVX-512 with Intel DL Boost and bfloat16 support"
};

// Updates `info` from an info line; returns whether `line` was one.
bool parse_verbose_info_line(const std::string &line, VerboseInfo &info);

// The ISA part of an implementation name ("brgconv:avx512_core_amx" -> "avx512_core_amx").
std::string isa_of_impl(const std::string &impl);

struct VerboseStats {
    struct Entry {
        int count = 0;
        double ms = 0.0;
    };
    std::map<std::pair<std::string, std::string>, Entry> by_kind_impl;  // (kind, impl)
    int exec_lines = 0;
    double total_ms = 0.0;

    void add(const VerboseExec &e);
    // Whether any compute primitive (conv/matmul/inner product) ran at all.
    bool has_compute() const;
    // ISAs the compute primitives ran on, most time first.
    std::vector<std::string> compute_isas() const;
    bool used_amx() const;
    nlohmann::json to_json() const;
};

VerboseStats parse_verbose_text(const std::string &text);

// True for primitive kinds that carry a model's arithmetic.
bool is_compute_kind(const std::string &kind);

}  // namespace ipex
