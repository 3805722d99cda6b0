#include "launch/partition.h"

#include <algorithm>
#include <map>
#include <set>

#include "base/errors.h"
#include "base/log.h"
#include "launch/id_list.h"

namespace ipex::launch {
namespace {

constexpr int kLatencyCoresPerInstance = 4;

struct Slot {
    int cpu;
    const Core *core;
};

// Slots of one NUMA node, in placement order.
struct NodeSlots {
    int node;
    std::vector<Slot> slots;
};

void check_conflicts(const PartitionRequest &req) {
    if (req.latency_mode && req.throughput_mode)
        throw_usage("--latency-mode and --throughput-mode conflict; pick one");
    for (const auto &[on, flag] : {std::pair{req.latency_mode, "--latency-mode"},
                                   std::pair{req.throughput_mode, "--throughput-mode"}}) {
        if (!on) continue;
        if (req.ninstances)
            throw_usage(std::string(flag) + " sets the number of instances; drop --ninstances");
        if (req.ncores_per_instance)
            throw_usage(std::string(flag) +
                        " sets the cores per instance; drop --ncores-per-instance");
    }
    if (req.cores_list && req.cpus_list)
        throw_usage("--cores-list and --cpus-list both choose the CPUs; use one of them");
    if (req.ninstances.value_or(1) < 1 || req.ncores_per_instance.value_or(0) < -1)
        throw_internal("partition: counts outside the ranges check_counts enforces");
}

std::string describe_pool(const std::vector<NodeSlots> &nodes, const std::string &unit) {
    std::string out;
    for (const auto &n : nodes) {
        if (!out.empty()) out += ", ";
        out += "node " + std::to_string(n.node) + ": " + std::to_string(n.slots.size());
    }
    return out.empty() ? "none" : out + " " + unit + "s";
}

// Applies the list filters and the E-core rule; returns usable cores in placement order.
std::vector<Core> select_cores(const Topology &topo, const PartitionRequest &req) {
    std::vector<int> all_cpus, all_cores;
    for (const auto &core : topo.cores) {
        all_cores.push_back(core.id);
        all_cpus.insert(all_cpus.end(), core.cpus.begin(), core.cpus.end());
    }
    std::sort(all_cpus.begin(), all_cpus.end());
    if (req.cpus_list)
        for (int cpu : *req.cpus_list)
            if (!topo.core_of_cpu(cpu))
                throw_usage("--cpus-list: CPU " + std::to_string(cpu) +
                            " is not usable here (usable CPUs: " + format_id_list(all_cpus) + ")");
    if (req.cores_list)
        for (int id : *req.cores_list)
            if (std::find(all_cores.begin(), all_cores.end(), id) == all_cores.end())
                throw_usage("--cores-list: core " + std::to_string(id) +
                            " does not exist or has no usable CPU (usable cores: " +
                            format_id_list(all_cores) + ")");
    if (req.nodes_list)
        for (int node : *req.nodes_list)
            if (std::find(topo.numa_nodes.begin(), topo.numa_nodes.end(), node) ==
                topo.numa_nodes.end())
                throw_usage("--nodes-list: NUMA node " + std::to_string(node) +
                            " has no usable cores (nodes: " + format_id_list(topo.numa_nodes) +
                            ")");

    std::vector<Core> out;
    for (const auto &core : topo.cores) {
        Core c = core;
        if (req.cpus_list) {
            c.cpus.clear();
            for (int cpu : core.cpus)
                if (std::binary_search(req.cpus_list->begin(), req.cpus_list->end(), cpu))
                    c.cpus.push_back(cpu);
            if (c.cpus.empty()) continue;
        }
        if (req.cores_list &&
            !std::binary_search(req.cores_list->begin(), req.cores_list->end(), c.id))
            continue;
        if (req.nodes_list &&
            !std::binary_search(req.nodes_list->begin(), req.nodes_list->end(), c.numa_node))
            continue;
        if (topo.hybrid && c.efficiency && !req.use_e_cores) {
            if (req.cores_list || req.cpus_list)
                throw_usage(std::string(req.cores_list ? "--cores-list" : "--cpus-list") +
                            ": core " + std::to_string(c.id) +
                            " is an E-core; add --use-e-cores to run on E-cores");
            continue;
        }
        out.push_back(c);
    }
    if (out.empty())
        throw_usage("no usable cores are left after --cores-list/--cpus-list/--nodes-list" +
                    std::string(topo.hybrid && !req.use_e_cores
                                    ? " and excluding E-cores (add --use-e-cores)"
                                    : ""));
    std::stable_sort(out.begin(), out.end(), [](const Core &a, const Core &b) {
        if (a.numa_node != b.numa_node) return a.numa_node < b.numa_node;
        if (a.efficiency != b.efficiency) return !a.efficiency;
        return a.id < b.id;
    });
    return out;
}

std::vector<NodeSlots> make_slots(const std::vector<Core> &cores, bool logical) {
    std::vector<NodeSlots> nodes;
    for (const auto &core : cores) {
        if (nodes.empty() || nodes.back().node != core.numa_node)
            nodes.push_back({core.numa_node, {}});
        if (logical) {
            for (int cpu : core.cpus) nodes.back().slots.push_back({cpu, &core});
        } else {
            nodes.back().slots.push_back({core.cpus.front(), &core});
        }
    }
    return nodes;
}

// Instances of `n` slots that fit without crossing a NUMA node.
int fit_within_nodes(const std::vector<NodeSlots> &nodes, int n) {
    int fit = 0;
    for (const auto &node : nodes) fit += static_cast<int>(node.slots.size()) / n;
    return fit;
}

std::string hint_more_slots(const Topology &topo, const PartitionRequest &req) {
    if (!req.use_logical_cores && topo.max_smt() > 1)
        return "; lower the counts or add --use-logical-cores";
    return "; lower the counts";
}

// Sizes per instance when instances may span nodes.
std::vector<int> flat_sizes(int total, int ninst, int n, bool leftovers_to_first) {
    std::vector<int> sizes(static_cast<size_t>(ninst), n);
    if (leftovers_to_first) {
        const int extra = total - n * ninst;
        for (int i = 0; i < extra; ++i) sizes[static_cast<size_t>(i % ninst)] += 1;
    }
    return sizes;
}

using Assignment = std::vector<std::vector<Slot>>;

Assignment assign_bound(std::vector<NodeSlots> &nodes, int ninst, int n, Strategy strategy,
                        bool leftovers_to_first) {
    const size_t k = nodes.size();
    std::vector<int> capacity(k), node_of(static_cast<size_t>(ninst), -1);
    for (size_t j = 0; j < k; ++j) capacity[j] = static_cast<int>(nodes[j].slots.size()) / n;
    size_t cursor = 0;
    int room = 0;
    for (int c : capacity) room += c;
    if (room < ninst) throw_internal("NUMA-bound placement ran out of room");
    for (int i = 0; i < ninst; ++i) {
        if (strategy == Strategy::close) {
            while (capacity[cursor] == 0) ++cursor;
        } else {
            while (capacity[cursor % k] == 0) ++cursor;
            cursor %= k;
        }
        node_of[static_cast<size_t>(i)] = static_cast<int>(cursor);
        capacity[cursor] -= 1;
        if (strategy == Strategy::scatter) ++cursor;
    }
    Assignment out(static_cast<size_t>(ninst));
    for (size_t j = 0; j < k; ++j) {
        std::vector<int> members;
        for (int i = 0; i < ninst; ++i)
            if (node_of[static_cast<size_t>(i)] == static_cast<int>(j)) members.push_back(i);
        if (members.empty()) continue;
        const int count = static_cast<int>(members.size());
        const int leftover = static_cast<int>(nodes[j].slots.size()) - count * n;
        size_t pos = 0;
        for (int m = 0; m < count; ++m) {
            int size = n;
            if (leftovers_to_first) size += leftover / count + (m < leftover % count ? 1 : 0);
            auto &dst = out[static_cast<size_t>(members[static_cast<size_t>(m)])];
            dst.assign(nodes[j].slots.begin() + static_cast<long>(pos),
                       nodes[j].slots.begin() + static_cast<long>(pos + static_cast<size_t>(size)));
            pos += static_cast<size_t>(size);
        }
    }
    return out;
}

Assignment assign_close(const std::vector<NodeSlots> &nodes, const std::vector<int> &sizes) {
    std::vector<Slot> flat;
    for (const auto &node : nodes) flat.insert(flat.end(), node.slots.begin(), node.slots.end());
    Assignment out;
    size_t pos = 0;
    for (int size : sizes) {
        out.emplace_back(flat.begin() + static_cast<long>(pos),
                         flat.begin() + static_cast<long>(pos + static_cast<size_t>(size)));
        pos += static_cast<size_t>(size);
    }
    return out;
}

// Instance i prefers node i mod K; a node without room for the whole instance is
// skipped for the next one that has room; if none has, the instance spills over.
Assignment assign_scatter(const std::vector<NodeSlots> &nodes, const std::vector<int> &sizes) {
    const size_t k = nodes.size();
    std::vector<size_t> used(k, 0);
    auto free_in = [&](size_t j) { return nodes[j].slots.size() - used[j]; };
    Assignment out;
    for (size_t i = 0; i < sizes.size(); ++i) {
        const size_t want = static_cast<size_t>(sizes[i]);
        size_t start = i % k;
        for (size_t step = 0; step < k; ++step) {
            if (free_in((i + step) % k) >= want) {
                start = (i + step) % k;
                break;
            }
        }
        std::vector<Slot> got;
        for (size_t step = 0; step < k && got.size() < want; ++step) {
            const size_t j = (start + step) % k;
            while (free_in(j) > 0 && got.size() < want) got.push_back(nodes[j].slots[used[j]++]);
        }
        out.push_back(got);
    }
    return out;
}

InstancePlacement describe(int index, const std::vector<Slot> &slots) {
    InstancePlacement p;
    p.index = index;
    std::set<int> cpus, cores, nodes, packages;
    for (const auto &s : slots) {
        cpus.insert(s.cpu);
        cores.insert(s.core->id);
        nodes.insert(s.core->numa_node);
        packages.insert(s.core->package);
        p.efficiency_cores = p.efficiency_cores || s.core->efficiency;
    }
    p.cpus.assign(cpus.begin(), cpus.end());
    p.cores.assign(cores.begin(), cores.end());
    p.numa_nodes.assign(nodes.begin(), nodes.end());
    p.packages.assign(packages.begin(), packages.end());
    return p;
}

}  // namespace

Partition partition(const Topology &topo, const PartitionRequest &req) {
    check_conflicts(req);
    const std::vector<Core> cores = select_cores(topo, req);
    std::vector<NodeSlots> nodes = make_slots(cores, req.use_logical_cores);
    Partition out;
    out.slot_unit = req.use_logical_cores ? "logical CPU" : "core";
    const std::string unit = out.slot_unit;
    int total = 0;
    for (const auto &node : nodes) total += static_cast<int>(node.slots.size());

    Assignment assignment;
    int ninst = 0;
    if (req.throughput_mode) {
        for (const auto &node : nodes) assignment.push_back(node.slots);
        ninst = static_cast<int>(nodes.size());
    } else {
        int n = req.ncores_per_instance.value_or(0);
        ninst = req.ninstances.value_or(0);
        const bool bind = req.bind_numa_node;
        if (req.latency_mode) {
            n = kLatencyCoresPerInstance;
            if (total < n) {
                out.warnings.push_back("--latency-mode wants 4 " + unit + "s per instance but only " +
                                       std::to_string(total) + " are usable; running one instance on all of them");
                n = total;
            }
            ninst = bind ? fit_within_nodes(nodes, n) : total / n;
            if (ninst == 0) {  // every node is smaller than n: one instance per largest node
                n = 0;
                for (const auto &node : nodes) n = std::max(n, static_cast<int>(node.slots.size()));
                ninst = fit_within_nodes(nodes, n);
            }
        } else if (n > 0) {
            const int fit = bind ? fit_within_nodes(nodes, n) : total / n;
            if (ninst == 0) ninst = fit;
            if (ninst == 0 || ninst > fit) {
                const int want = std::max(ninst, 1);
                if (bind)
                    throw_usage("--bind-numa-node: " + std::to_string(want) + " instance(s) of " +
                                std::to_string(n) + " " + unit + "s do not fit inside NUMA nodes (" +
                                describe_pool(nodes, unit) + ")" + hint_more_slots(topo, req) +
                                " or drop --bind-numa-node");
                throw_usage("--ninstances " + std::to_string(want) + " x --ncores-per-instance " +
                            std::to_string(n) + " needs " + std::to_string(want * n) + " " + unit +
                            "s, but only " + std::to_string(total) + " are usable (" +
                            describe_pool(nodes, unit) + ")" + hint_more_slots(topo, req));
            }
        } else {
            if (ninst == 0) ninst = 1;
            if (ninst > total)
                throw_usage("--ninstances " + std::to_string(ninst) + " needs at least " +
                            std::to_string(ninst) + " " + unit + "s, but only " + std::to_string(total) +
                            " are usable (" + describe_pool(nodes, unit) + ")" + hint_more_slots(topo, req));
            n = total / ninst;
            if (bind) {
                while (n > 0 && fit_within_nodes(nodes, n) < ninst) --n;
                if (n == 0)
                    throw_usage("--bind-numa-node: " + std::to_string(ninst) +
                                " instances cannot each stay inside one NUMA node (" +
                                std::to_string(nodes.size()) + " nodes); lower --ninstances or drop --bind-numa-node");
            }
        }
        const bool leftovers_to_first = req.ncores_per_instance == -1;
        if (bind) {
            assignment = assign_bound(nodes, ninst, n, req.strategy, leftovers_to_first);
        } else {
            const auto sizes = flat_sizes(total, ninst, n, leftovers_to_first);
            assignment = req.strategy == Strategy::close ? assign_close(nodes, sizes)
                                                         : assign_scatter(nodes, sizes);
        }
    }

    out.ninstances = ninst;
    int used = 0;
    std::vector<InstancePlacement> all;
    std::vector<int> crossing;
    for (int i = 0; i < ninst; ++i) {
        const auto &slots = assignment[static_cast<size_t>(i)];
        used += static_cast<int>(slots.size());
        all.push_back(describe(i, slots));
        if (all.back().numa_nodes.size() > 1) crossing.push_back(i);
    }
    out.unused_slots = total - used;
    // One instance on the whole machine is what was asked for; warn only when splitting.
    if (!crossing.empty() && ninst > 1)
        out.warnings.push_back(
            std::string(crossing.size() == 1 ? "instance " : "instances ") +
            format_id_list(crossing) + (crossing.size() == 1 ? " spans" : " span") +
            " more than one NUMA node, so part of " + (crossing.size() == 1 ? "its" : "their") +
            " memory traffic crosses nodes; use --bind-numa-node or a --ncores-per-instance that "
            "divides the cores of a node");
    if (req.instance_idx) {
        for (int idx : *req.instance_idx)
            if (idx >= ninst)
                throw_usage("--instance-idx " + std::to_string(idx) + ": only " +
                            std::to_string(ninst) + " instance(s) are planned (0-" +
                            std::to_string(ninst - 1) + ")");
        for (int idx : *req.instance_idx) out.instances.push_back(all[static_cast<size_t>(idx)]);
    } else {
        out.instances = std::move(all);
    }
    return out;
}

}  // namespace ipex::launch
