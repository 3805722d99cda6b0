#include <gtest/gtest.h>

#include "base/errors.h"
#include "base/log.h"
#include "launch/env_plan.h"
#include "topology_fixtures.h"

namespace ipex::launch {
namespace {

using testing::TempDir;

// A library directory holding (empty) files with the given names.
struct FakeLibs {
    TempDir dir;
    explicit FakeLibs(const std::vector<std::string> &names) {
        for (const auto &n : names) testing::write_text(dir.file(n), "");
    }
    std::string path(const std::string &name) const { return dir.file(name); }
};

InstancePlacement placement(std::vector<int> cpus, int index = 0) {
    InstancePlacement p;
    p.index = index;
    p.cpus = std::move(cpus);
    p.cores = p.cpus;
    p.numa_nodes = {0};
    return p;
}

EnvRequest request(const FakeLibs &libs) {
    EnvRequest r;
    r.library_dirs = {libs.dir.path()};
    return r;
}

bool mentions(const std::vector<std::string> &warnings, const std::string &text) {
    for (const auto &w : warnings)
        if (w.find(text) != std::string::npos) return true;
    return false;
}

TEST(EnvPlan, AutoPrefersTcmallocThenJemalloc) {
    FakeLibs both({"libtcmalloc.so.4", "libjemalloc.so.2"});
    RuntimeChoice c = choose_runtimes(request(both), {});
    EXPECT_EQ(c.allocator, "tcmalloc");
    EXPECT_EQ(c.allocator_library, both.path("libtcmalloc.so.4"));

    FakeLibs jemalloc_only({"libjemalloc.so.2"});
    c = choose_runtimes(request(jemalloc_only), {});
    EXPECT_EQ(c.allocator, "jemalloc");
    EXPECT_EQ(c.allocator_library, jemalloc_only.path("libjemalloc.so.2"));

    FakeLibs minimal_only({"libtcmalloc_minimal.so.4"});
    c = choose_runtimes(request(minimal_only), {});
    EXPECT_EQ(c.allocator, "tcmalloc");
    EXPECT_EQ(c.allocator_library, minimal_only.path("libtcmalloc_minimal.so.4"));
}

TEST(EnvPlan, BenchmarkPrefersJemallocAndItsSetting) {
    FakeLibs both({"libtcmalloc.so.4", "libjemalloc.so.2"});
    EnvRequest r = request(both);
    r.benchmark = true;
    const RuntimeChoice c = choose_runtimes(r, {});
    EXPECT_EQ(c.allocator, "jemalloc");
    const InstanceEnv env = plan_instance_env(c, r, {}, placement({0, 1}), 1);
    EXPECT_EQ(env.set.at("MALLOC_CONF"), kJemallocConfBenchmark);
}

TEST(EnvPlan, JemallocGetsTheInferenceSetting) {
    FakeLibs libs({"libjemalloc.so.2"});
    EnvRequest r = request(libs);
    r.allocator = Allocator::jemalloc;
    const RuntimeChoice c = choose_runtimes(r, {});
    const InstanceEnv env = plan_instance_env(c, r, {}, placement({0}), 1);
    EXPECT_EQ(env.set.at("MALLOC_CONF"), kJemallocConfInference);
    EXPECT_EQ(env.ld_preload.front(), libs.path("libjemalloc.so.2"));
    EXPECT_EQ(env.set.count("TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD"), 0u);
}

TEST(EnvPlan, MissingAllocatorWarnsInAutoModeNamingThePackages) {
    FakeLibs none({});
    const RuntimeChoice c = choose_runtimes(request(none), {});
    EXPECT_EQ(c.allocator, "default");
    EXPECT_TRUE(c.allocator_library.empty());
    EXPECT_TRUE(mentions(c.warnings, "libjemalloc2"));
    EXPECT_TRUE(mentions(c.warnings, "libgoogle-perftools4"));
}

TEST(EnvPlan, MissingAllocatorAskedForByNameIsAnError) {
    FakeLibs none({});
    EnvRequest r = request(none);
    r.allocator = Allocator::jemalloc;
    try {
        choose_runtimes(r, {});
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::unsupported);
        EXPECT_NE(std::string(e.what()).find("--memory-allocator jemalloc"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find("libjemalloc2"), std::string::npos);
    }
}

TEST(EnvPlan, DefaultAllocatorPreloadsNothing) {
    FakeLibs both({"libtcmalloc.so.4", "libjemalloc.so.2"});
    EnvRequest r = request(both);
    r.allocator = Allocator::system;
    r.omp = OmpRuntime::system;
    const RuntimeChoice c = choose_runtimes(r, {});
    const InstanceEnv env = plan_instance_env(c, r, {}, placement({0}), 1);
    EXPECT_TRUE(env.ld_preload.empty());
    EXPECT_EQ(env.set.count("LD_PRELOAD"), 0u);
    EXPECT_EQ(env.set.count("MALLOC_CONF"), 0u);
}

TEST(EnvPlan, UserPreloadEntriesAreKeptAfterOursWithoutDuplicates) {
    FakeLibs libs({"libjemalloc.so.2", "libomp.so.5", "libfoo.so"});
    EnvRequest r = request(libs);
    r.allocator = Allocator::jemalloc;
    const Environment base{{"LD_PRELOAD", libs.path("libfoo.so") + " " + libs.path("libomp.so.5")}};
    const RuntimeChoice c = choose_runtimes(r, base);
    EXPECT_EQ(c.omp, "intel");
    EXPECT_TRUE(c.omp_from_user);
    const InstanceEnv env = plan_instance_env(c, r, base, placement({0}), 1);
    const std::vector<std::string> expected{libs.path("libjemalloc.so.2"), libs.path("libfoo.so"),
                                            libs.path("libomp.so.5")};
    EXPECT_EQ(env.ld_preload, expected);
    EXPECT_EQ(env.set.at("LD_PRELOAD"), expected[0] + ":" + expected[1] + ":" + expected[2]);
}

TEST(EnvPlan, SameLibraryByAnotherPathIsNotPreloadedTwice) {
    FakeLibs libs({"libjemalloc.so.2"});
    EnvRequest r = request(libs);
    r.allocator = Allocator::jemalloc;
    r.omp = OmpRuntime::system;
    const Environment base{{"LD_PRELOAD", libs.dir.path() + "/./libjemalloc.so.2"}};
    const InstanceEnv env = plan_instance_env(choose_runtimes(r, base), r, base, placement({0}), 1);
    EXPECT_EQ(env.ld_preload, std::vector<std::string>{libs.path("libjemalloc.so.2")});
}

TEST(EnvPlan, AutoUsesAnAllocatorTheUserAlreadyPreloads) {
    FakeLibs libs({"libtcmalloc.so.4", "libjemalloc.so.2"});
    EnvRequest r = request(libs);
    r.omp = OmpRuntime::system;
    const Environment base{{"LD_PRELOAD", "/opt/x/libjemalloc.so.2"}};
    const RuntimeChoice c = choose_runtimes(r, base);
    EXPECT_EQ(c.allocator, "jemalloc");
    EXPECT_TRUE(c.allocator_from_user);
    const InstanceEnv env = plan_instance_env(c, r, base, placement({0}), 1);
    EXPECT_EQ(env.ld_preload, std::vector<std::string>{"/opt/x/libjemalloc.so.2"});
    EXPECT_EQ(env.set.count("LD_PRELOAD"), 0u);  // left exactly as the user set it
    EXPECT_EQ(env.set.at("MALLOC_CONF"), kJemallocConfInference);
}

TEST(EnvPlan, ExplicitAllocatorWarnsAboutAnotherOneInLdPreload) {
    FakeLibs libs({"libtcmalloc.so.4"});
    EnvRequest r = request(libs);
    r.allocator = Allocator::tcmalloc;
    const RuntimeChoice c = choose_runtimes(r, {{"LD_PRELOAD", "/opt/libjemalloc.so.2"}});
    EXPECT_TRUE(mentions(c.warnings, "/opt/libjemalloc.so.2"));
}

TEST(EnvPlan, GnuOpenMpVariables) {
    FakeLibs libs({});
    EnvRequest r = request(libs);
    r.omp = OmpRuntime::system;
    const RuntimeChoice c = choose_runtimes(r, {});
    EXPECT_EQ(c.omp, "gnu");
    EXPECT_TRUE(c.warnings.size() == 1);  // only the allocator one
    const InstanceEnv env = plan_instance_env(c, r, {}, placement({4, 6, 7}), 2);
    EXPECT_EQ(env.set.at("OMP_NUM_THREADS"), "3");
    EXPECT_EQ(env.set.at("OMP_PLACES"), "{4},{6},{7}");
    EXPECT_EQ(env.set.at("OMP_PROC_BIND"), "close");
    EXPECT_EQ(env.set.at("OMP_SCHEDULE"), "STATIC");
    EXPECT_EQ(env.set.count("KMP_AFFINITY"), 0u);
    EXPECT_EQ(env.set.count("KMP_BLOCKTIME"), 0u);
}

TEST(EnvPlan, IntelOpenMpVariablesAndPreload) {
    FakeLibs libs({"libomp.so.5"});
    EnvRequest r = request(libs);
    r.allocator = Allocator::system;
    const RuntimeChoice c = choose_runtimes(r, {});
    EXPECT_EQ(c.omp, "intel");
    EXPECT_EQ(c.omp_library, libs.path("libomp.so.5"));
    const InstanceEnv env = plan_instance_env(c, r, {}, placement({4, 5}), 2);
    EXPECT_EQ(env.set.at("OMP_NUM_THREADS"), "2");
    EXPECT_EQ(env.set.at("KMP_AFFINITY"), "granularity=fine,explicit,proclist=[4,5]");
    EXPECT_EQ(env.set.at("KMP_BLOCKTIME"), kKmpBlocktime);
    EXPECT_EQ(env.set.count("OMP_PLACES"), 0u);
    EXPECT_EQ(env.ld_preload, std::vector<std::string>{libs.path("libomp.so.5")});
}

TEST(EnvPlan, IntelRuntimePrefersLibiomp5) {
    FakeLibs libs({"libomp.so.5", "libiomp5.so"});
    const RuntimeChoice c = choose_runtimes(request(libs), {});
    EXPECT_EQ(c.omp_library, libs.path("libiomp5.so"));
}

TEST(EnvPlan, MissingIntelRuntime) {
    FakeLibs none({});
    const RuntimeChoice c = choose_runtimes(request(none), {});
    EXPECT_EQ(c.omp, "gnu");
    EXPECT_TRUE(mentions(c.warnings, "libomp5-14"));
    EnvRequest r = request(none);
    r.omp = OmpRuntime::intel;
    try {
        choose_runtimes(r, {});
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_EQ(e.code(), ExitCode::unsupported);
        EXPECT_NE(std::string(e.what()).find("--omp-runtime intel"), std::string::npos);
    }
}

TEST(EnvPlan, UserVariablesAreKeptAndReportedOnce) {
    FakeLibs libs({"libjemalloc.so.2"});
    EnvRequest r = request(libs);
    r.omp = OmpRuntime::system;
    const Environment base{{"OMP_NUM_THREADS", "8"}, {"MALLOC_CONF", "narenas:1"}};
    const RuntimeChoice c = choose_runtimes(r, base);
    std::vector<InstanceEnv> envs{plan_instance_env(c, r, base, placement({0, 1}, 0), 2),
                                  plan_instance_env(c, r, base, placement({2, 3}, 1), 2)};
    for (const auto &env : envs) {
        EXPECT_EQ(env.set.count("OMP_NUM_THREADS"), 0u);
        EXPECT_EQ(env.kept.at("OMP_NUM_THREADS"), "8");
        EXPECT_EQ(env.kept.at("MALLOC_CONF"), "narenas:1");
        EXPECT_EQ(env.set.count("OMP_PLACES"), 1u);
    }
    EXPECT_EQ(apply_env(base, envs[1]).at("OMP_NUM_THREADS"), "8");
    EXPECT_EQ(apply_env(base, envs[1]).at("OMP_PLACES"), "{2},{3}");
    const auto warnings = kept_variable_warnings(envs);
    ASSERT_EQ(warnings.size(), 2u);
    EXPECT_TRUE(mentions(warnings, "OMP_NUM_THREADS=8 is already set"));
    EXPECT_TRUE(mentions(warnings, "would set 2"));
}

TEST(EnvPlan, OnednnVerbose) {
    FakeLibs none({});
    EnvRequest r = request(none);
    r.onednn_verbose = true;
    const RuntimeChoice c = choose_runtimes(r, {});
    InstanceEnv env = plan_instance_env(c, r, {}, placement({0}), 1);
    EXPECT_EQ(env.set.at("ONEDNN_VERBOSE"), "1");
    EXPECT_EQ(env.set.at("DNNL_VERBOSE"), "1");

    const Environment prints{{"ONEDNN_VERBOSE", "profile_exec,dispatch"}};
    env = plan_instance_env(choose_runtimes(r, prints), r, prints, placement({0}), 1);
    EXPECT_EQ(env.set.count("ONEDNN_VERBOSE"), 0u);

    const Environment off{{"ONEDNN_VERBOSE", "0"}};
    const RuntimeChoice c2 = choose_runtimes(r, off);
    EXPECT_TRUE(mentions(c2.warnings, "ONEDNN_VERBOSE=0"));
    EXPECT_EQ(plan_instance_env(c2, r, off, placement({0}), 1).set.at("ONEDNN_VERBOSE"), "1");

    r.onednn_verbose = false;
    EXPECT_EQ(plan_instance_env(c, r, {}, placement({0}), 1).set.count("ONEDNN_VERBOSE"), 0u);
}

TEST(EnvPlan, InstanceIdentityVariables) {
    FakeLibs none({});
    const EnvRequest r = request(none);
    const InstanceEnv env =
        plan_instance_env(choose_runtimes(r, {}), r, {{"IPEX_LAUNCH_INSTANCE", "9"}},
                          placement({2, 3, 4, 8}, 3), 4);
    EXPECT_EQ(env.set.at("IPEX_LAUNCH_INSTANCE"), "3");
    EXPECT_EQ(env.set.at("IPEX_LAUNCH_NINSTANCES"), "4");
    EXPECT_EQ(env.set.at("IPEX_LAUNCH_CPUS"), "2-4,8");
}

TEST(EnvPlan, TcmallocReportThreshold) {
    FakeLibs libs({"libtcmalloc.so.4"});
    const EnvRequest r = request(libs);
    const InstanceEnv env = plan_instance_env(choose_runtimes(r, {}), r, {}, placement({0}), 1);
    EXPECT_EQ(env.set.at("TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD"), kTcmallocReportThreshold);
    EXPECT_EQ(env.set.count("MALLOC_CONF"), 0u);
}

TEST(LibrarySearch, LdLibraryPathComesFirst) {
    const auto dirs = default_library_dirs({{"LD_LIBRARY_PATH", "/a:/b"}, {"CONDA_PREFIX", "/c"}});
    ASSERT_GE(dirs.size(), 4u);
    EXPECT_EQ(dirs[0], "/a");
    EXPECT_EQ(dirs[1], "/b");
    EXPECT_EQ(dirs[2], "/c/lib");
}

TEST(LibrarySearch, SplitPreloadAcceptsColonsAndSpaces) {
    EXPECT_EQ(split_preload("a.so:b.so c.so  :d.so"),
              (std::vector<std::string>{"a.so", "b.so", "c.so", "d.so"}));
}

}  // namespace
}  // namespace ipex::launch
