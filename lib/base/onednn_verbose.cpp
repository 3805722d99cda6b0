#include "base/onednn_verbose.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace ipex {
namespace {

std::vector<std::string> split(const std::string &line, char sep) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : line) {
        if (c == sep) {
            out.push_back(cur);
            cur.clear();
        } else if (c != '\r') {
            cur += c;
        }
    }
    out.push_back(cur);
    return out;
}

bool is_isa_name(const std::string &s) {
    static const char *prefixes[] = {"sse41", "avx", "avx2", "avx512", "amx", "avx10"};
    for (const char *p : prefixes)
        if (s.rfind(p, 0) == 0) return true;
    return false;
}

}  // namespace

bool is_compute_kind(const std::string &kind) {
    return kind == "convolution" || kind == "deconvolution" || kind == "matmul" ||
           kind == "inner_product" || kind == "rnn";
}

std::string isa_of_impl(const std::string &impl) {
    // Implementation names look like "brgconv:avx512_core_bf16", "jit:avx512_core",
    // "brg:avx512_core_amx", "gemm:jit", "ref:any", "jit_int8:avx512_core_vnni".
    for (const auto &part : split(impl, ':'))
        if (is_isa_name(part)) return part;
    return "";
}

std::optional<VerboseExec> parse_verbose_line(const std::string &line) {
    if (line.rfind("onednn_verbose,", 0) != 0 && line.rfind("dnnl_verbose,", 0) != 0)
        return std::nullopt;
    const auto fields = split(line, ',');
    // exec follows the optional "v1" marker, timestamp and "primitive" fields.
    size_t exec = 0;
    for (size_t i = 1; i < fields.size() && i < 5; ++i) {
        if (fields[i] == "exec") {
            exec = i;
            break;
        }
    }
    // exec, engine, kind, impl, ..., time: at least 5 fields from exec on.
    if (exec == 0 || fields.size() < exec + 5) return std::nullopt;
    VerboseExec e;
    e.engine = fields[exec + 1];
    e.kind = fields[exec + 2];
    e.impl = fields[exec + 3];
    e.isa = isa_of_impl(e.impl);
    try {
        size_t used = 0;
        e.ms = std::stod(fields.back(), &used);
        // A time is a finite count of milliseconds, never negative: a line that says
        // otherwise is not one oneDNN wrote, and would push a share past 1.
        if (used != fields.back().size() || !std::isfinite(e.ms) || e.ms < 0.0)
            return std::nullopt;
    } catch (const std::exception &) {
        return std::nullopt;
    }
    return e;
}

bool parse_verbose_info_line(const std::string &line, VerboseInfo &info) {
    if (line.rfind("onednn_verbose,", 0) != 0 && line.rfind("dnnl_verbose,", 0) != 0)
        return false;
    const auto fields = split(line, ',');
    size_t at = 1;
    if (at < fields.size() && fields[at] == "v1") ++at;
    if (at >= fields.size() || fields[at] != "info") return false;
    for (size_t i = at + 1; i < fields.size(); ++i) {
        const std::string &f = fields[i];
        if (f.rfind("oneDNN v", 0) == 0 || f.rfind("DNNL v", 0) == 0) {
            const size_t v = f.find(" v") + 1;
            info.version = f.substr(v, f.find(' ', v) == std::string::npos ? std::string::npos
                                                                            : f.find(' ', v) - v);
        } else if (f.rfind("isa:", 0) == 0) {
            info.isa = f.substr(4);
            // The ISA description may itself contain commas.
            for (size_t j = i + 1; j < fields.size(); ++j) info.isa += "," + fields[j];
            break;
        }
    }
    return true;
}

void VerboseStats::add(const VerboseExec &e) {
    auto &entry = by_kind_impl[{e.kind, e.impl}];
    entry.count += 1;
    entry.ms += e.ms;
    exec_lines += 1;
    total_ms += e.ms;
}

bool VerboseStats::has_compute() const {
    for (const auto &kv : by_kind_impl)
        if (is_compute_kind(kv.first.first)) return true;
    return false;
}

std::vector<std::string> VerboseStats::compute_isas() const {
    std::map<std::string, double> time;
    for (const auto &[key, entry] : by_kind_impl) {
        if (!is_compute_kind(key.first)) continue;
        std::string isa = isa_of_impl(key.second);
        time[isa.empty() ? key.second : isa] += entry.ms + 1e-6 * entry.count;
    }
    std::vector<std::pair<std::string, double>> v(time.begin(), time.end());
    std::sort(v.begin(), v.end(), [](auto &a, auto &b) { return a.second > b.second; });
    std::vector<std::string> out;
    for (auto &p : v) out.push_back(p.first);
    return out;
}

bool VerboseStats::used_amx() const {
    for (const auto &kv : by_kind_impl)
        if (is_compute_kind(kv.first.first) && isa_of_impl(kv.first.second).find("amx") != std::string::npos)
            return true;
    return false;
}

nlohmann::json VerboseStats::to_json() const {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto &[key, entry] : by_kind_impl) {
        rows.push_back({{"kind", key.first},
                        {"impl", key.second},
                        {"count", entry.count},
                        {"ms", entry.ms},
                        {"time_share", total_ms > 0 ? entry.ms / total_ms : 0.0}});
    }
    return {{"primitives", rows},
            {"exec_lines", exec_lines},
            {"total_ms", total_ms},
            {"compute_isas", compute_isas()},
            {"amx", used_amx()}};
}

VerboseStats parse_verbose_text(const std::string &text) {
    VerboseStats stats;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
        if (auto e = parse_verbose_line(line)) stats.add(*e);
    return stats;
}

}  // namespace ipex
