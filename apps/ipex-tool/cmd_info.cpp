#include <iomanip>
#include <iostream>
#include <optional>

#include "bench/machine_limits.h"
#include "commands.h"
#include "base/cpu_features.h"
#include "core/system_info.h"

namespace ipex::app {
namespace {

struct InfoArgs {
    bool json = false;
    bool limits = false;
    int threads = 0;
};

void print_limits(const bench::MachineLimits &m) {
    std::cout << "limits:     measured on " << m.threads << " thread(s) in " << std::fixed << std::setprecision(1)
              << m.seconds << " s\n";
    using bench::peak_text;
    std::cout << "  bf16 dot peak (VDPBF16PS):   " << peak_text(m.bf16_dot_gflops, "GFLOP/s", "avx512_bf16") << "\n";
    std::cout << "  fp32 FMA peak (VFMADD231PS): " << peak_text(m.fp32_fma_gflops, "GFLOP/s", "fma") << "\n";
    std::cout << "  int8 VNNI peak (VPDPBUSD):   " << peak_text(m.int8_vnni_gops, "GOP/s", "avx512_vnni") << "\n";
    std::cout << "  read bandwidth:              " << std::setprecision(1) << m.read_gbs << " GB/s ("
              << std::setprecision(0) << m.read_buffer_mib << " MiB buffer)\n";
}

}  // namespace

Runner setup_info(CLI::App &sub) {
    auto a = std::make_shared<InfoArgs>();
    sub.add_flag("--json", a->json, "print the report as JSON");
    auto *limits_flag = sub.add_flag("--limits", a->limits,
                 "also measure the machine's limits (about 1.5 s): bf16 dot, fp32 FMA and int8 VNNI peaks, read "
                 "bandwidth");
    sub.add_option("--threads", a->threads,
                   "threads for --limits, 1 to 4096 (default: OMP_NUM_THREADS, else the physical cores this process "
                   "may run on)")
        ->check(CLI::Range(1, kMaxThreads))
        ->needs(limits_flag);
    return [a] {
        nlohmann::json info = info_json();
        std::optional<bench::MachineLimits> limits;
        if (a->limits) {
            limits = bench::measure_machine_limits(a->threads > 0 ? a->threads : default_threads());
            info["limits"] = limits->to_json();
        }
        if (a->json) {
            std::cout << info.dump(2) << "\n";
            return 0;
        }
        std::cout << "cpu:        " << info["cpu"]["model"].get<std::string>() << " ("
                  << info["cpu"]["vendor"].get<std::string>() << ")\n";
        std::cout << "features:  ";
        for (const auto &[name, present] : cpu_features().flags()) std::cout << " " << name << (present ? "+" : "-");
        std::cout << "\n";
        std::cout << "amx:        " << (info["amx"]["usable"].get<bool>() ? "usable" : "not usable")
                  << " (" << info["amx"]["status"].get<std::string>() << ")\n";
        std::cout << "onednn:     " << info["onednn"]["version"].get<std::string>() << ", dispatches "
                  << info["onednn"]["isa"].get<std::string>() << "\n";
        std::cout << "libtorch:   " << info["libtorch"]["version"].get<std::string>() << "\n";
        std::cout << "threads:    " << info["threads"].get<int>() << "\n";
        const auto &t = info["topology"];
        std::cout << "topology:   " << t["sockets"].get<int>() << " socket(s), " << t["numa_nodes"].get<int>()
                  << " NUMA node(s), " << t["cores"].get<int>() << " core(s), " << t["logical_cpus"].get<int>()
                  << " logical CPU(s), SMT " << t["smt"].get<int>() << "\n";
        if (limits) print_limits(*limits);
        return 0;
    };
}

}  // namespace ipex::app
