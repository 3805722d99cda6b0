// The --hostfile of a multi-node run: one host a line, as Open MPI and MPICH write them.
//   # comment                 blank lines and text after '#' are ignored
//   node0 slots=2             Open MPI style (max_slots=N is accepted and ignored)
//   node1:2                   MPICH style
//   10.0.0.3                  no slot count
// Hosts follow host_name.h (RFC 1123 names or IPv4 addresses; no IPv6, whose ':' this
// syntax gives the slots). A host may appear once. Every size is bounded before use (line
// length, host count, slots), so any text is safe to parse.
#pragma once

#include <string>
#include <vector>

namespace ipex::launch {

constexpr size_t kMaxHostfileLine = 4096;    // characters in one line
constexpr size_t kMaxHostfileHosts = 65536;  // hosts in one file
constexpr size_t kMaxHostfileBytes = 16u << 20;
constexpr int kMaxHostSlots = 4096;          // slots of one host

struct HostEntry {
    std::string name;
    int slots = 0;  // 0: not given
    int line = 0;   // 1-based line in the file
};

// Parses hostfile text; `source` names the file in errors. Throws Error(bad_input)
// naming the source, the line and what is wrong (for a host name: the name and the rule
// it breaks); an empty host list is an error too.
std::vector<HostEntry> parse_hostfile(const std::string &text, const std::string &source);

// Reads and parses `path`. Throws Error(bad_input) when it cannot be read.
std::vector<HostEntry> load_hostfile(const std::string &path);

}  // namespace ipex::launch
