#include "commands/info.h"

#include <iomanip>
#include <sstream>

#include "base/cpu_features.h"
#include "commands/threads.h"
#include "core/system_info.h"

namespace ipex::commands {

std::string InfoReport::text() const {
    std::ostringstream out;
    out << "cpu:        " << info["cpu"]["model"].get<std::string>() << " ("
        << info["cpu"]["vendor"].get<std::string>() << ")\n";
    out << "features:  ";
    for (const auto &[name, present] : cpu_features().flags()) out << " " << name << (present ? "+" : "-");
    out << "\n";
    out << "amx:        " << (info["amx"]["usable"].get<bool>() ? "usable" : "not usable") << " ("
        << info["amx"]["status"].get<std::string>() << ")\n";
    out << "onednn:     " << info["onednn"]["version"].get<std::string>() << ", dispatches "
        << info["onednn"]["isa"].get<std::string>() << "\n";
    out << "libtorch:   " << info["libtorch"]["version"].get<std::string>() << "\n";
    out << "threads:    " << info["threads"].get<int>() << "\n";
    const auto &t = info["topology"];
    out << "topology:   " << t["sockets"].get<int>() << " socket(s), " << t["numa_nodes"].get<int>()
        << " NUMA node(s), " << t["cores"].get<int>() << " core(s), " << t["logical_cpus"].get<int>()
        << " logical CPU(s), SMT " << t["smt"].get<int>() << "\n";
    if (limits) {
        const bench::MachineLimits &m = *limits;
        using bench::peak_text;
        out << "limits:     measured on " << m.threads << " thread(s) in " << std::fixed << std::setprecision(1)
            << m.seconds << " s\n";
        out << "  bf16 dot peak (VDPBF16PS):   " << peak_text(m.bf16_dot_gflops, "GFLOP/s", "avx512_bf16") << "\n";
        out << "  fp32 FMA peak (VFMADD231PS): " << peak_text(m.fp32_fma_gflops, "GFLOP/s", "fma") << "\n";
        out << "  int8 VNNI peak (VPDPBUSD):   " << peak_text(m.int8_vnni_gops, "GOP/s", "avx512_vnni") << "\n";
        out << "  read bandwidth:              " << std::setprecision(1) << m.read_gbs << " GB/s ("
            << std::setprecision(0) << m.read_buffer_mib << " MiB buffer)\n";
    }
    return out.str();
}

InfoReport run_info(const InfoRequest &request) {
    InfoReport report;
    report.info = info_json();
    if (request.limits) {
        report.limits = bench::measure_machine_limits(thread_count(request.threads));
        report.info["limits"] = report.limits->to_json();
    }
    return report;
}

}  // namespace ipex::commands
