#include "topology_fixtures.h"

#include <hwloc.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace ipex::launch::testing {

TempDir::TempDir() {
    std::string tmpl = std::filesystem::temp_directory_path().string() + "/ipex-launch-test-XXXXXX";
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

void write_text(const std::string &path, const std::string &text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + path);
}

void write_hybrid_xml(const std::string &path, const std::string &synthetic,
                      const std::vector<int> &e_cpus, bool by_core_type) {
    hwloc_topology_t topo;
    hwloc_topology_init(&topo);
    if (hwloc_topology_set_synthetic(topo, synthetic.c_str()) != 0 || hwloc_topology_load(topo) != 0)
        throw std::runtime_error("bad synthetic topology " + synthetic);
    hwloc_bitmap_t e = hwloc_bitmap_alloc();
    for (int cpu : e_cpus) hwloc_bitmap_set(e, static_cast<unsigned>(cpu));
    hwloc_bitmap_t p = hwloc_bitmap_dup(hwloc_topology_get_topology_cpuset(topo));
    hwloc_bitmap_andnot(p, p, e);
    std::string key = "CoreType", atom = "IntelAtom", core = "IntelCore";
    hwloc_info_s e_info{key.data(), atom.data()};
    hwloc_info_s p_info{key.data(), core.data()};
    if (by_core_type) {
        hwloc_cpukinds_register(topo, e, -1, 1, &e_info, 0);
        hwloc_cpukinds_register(topo, p, -1, 1, &p_info, 0);
    } else {
        hwloc_cpukinds_register(topo, e, 0, 0, nullptr, 0);
        hwloc_cpukinds_register(topo, p, 1, 0, nullptr, 0);
    }
    const int rc = hwloc_topology_export_xml(topo, path.c_str(), 0);
    hwloc_bitmap_free(e);
    hwloc_bitmap_free(p);
    hwloc_topology_destroy(topo);
    if (rc != 0) throw std::runtime_error("cannot export " + path);
}

}  // namespace ipex::launch::testing
