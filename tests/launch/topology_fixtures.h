// Machines the partition tests plan for, as hwloc synthetic descriptions, plus hybrid
// (P/E core) machines written to hwloc XML, since synthetic strings cannot carry kinds.
#pragma once

#include <string>
#include <vector>

namespace ipex::launch::testing {

// 2 sockets x 28 cores x 2 threads, one NUMA node per socket, Linux numbering
// (core c has CPUs c and c + 56).
constexpr const char *kTwoSocketsSmt = "package:2 numa:1 core:28 pu:2(indexes=2*56:1*2)";
// 1 socket x 56 cores, no SMT, one NUMA node.
constexpr const char *kOneSocket56 = "package:1 core:56 pu:1";
// 2 sockets x 2 NUMA nodes x 8 cores x 2 threads (hwloc numbering: core c has 2c, 2c+1).
constexpr const char *kFourNodes = "package:2 numa:2 core:8 pu:2";

// A directory removed with everything in it when the object goes.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir &) = delete;
    TempDir &operator=(const TempDir &) = delete;
    const std::string &path() const { return path_; }
    std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
    std::string path_;
};

// Writes `synthetic` as hwloc XML to `path`, with the CPUs in `e_cpus` registered as a
// less performant CPU kind (E-cores). With `by_core_type`, the kinds carry no efficiency
// but a CoreType info (IntelAtom / IntelCore), as on kernels without efficiency data.
void write_hybrid_xml(const std::string &path, const std::string &synthetic,
                      const std::vector<int> &e_cpus, bool by_core_type = false);

void write_text(const std::string &path, const std::string &text);

}  // namespace ipex::launch::testing
