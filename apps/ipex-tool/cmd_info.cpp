#include <iostream>

#include "commands.h"
#include "core/cpu_features.h"
#include "core/system_info.h"

namespace ipex::app {

Runner setup_info(CLI::App &sub) {
    auto json = std::make_shared<bool>(false);
    sub.add_flag("--json", *json, "print the report as JSON");
    return [json] {
        const nlohmann::json info = info_json();
        if (*json) {
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
        return 0;
    };
}

}  // namespace ipex::app
