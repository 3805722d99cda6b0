// CPU lists and pools, IPEX's cut of a pool into streams, and streams that run on their own
// CPUs with an OpenMP team of their size while the caller's thread keeps its own.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <stdexcept>

#include "runtime/cpu_pool.h"
#include "runtime/stream.h"
#include "unit/test_errors.h"

namespace ipex::runtime {
namespace {

using ipex::testing::code_of;

TEST(CpuList, ParsesAndPrints) {
    EXPECT_EQ(parse_cpu_list("0-3,8, 10-11\n", "list"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
    EXPECT_EQ(parse_cpu_list("5,1,5", "list"), (std::vector<int>{1, 5}));
    EXPECT_EQ(cpu_list_text({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
    EXPECT_EQ(cpu_list_text({}), "");
    for (const char *bad : {"3-1", "x", "1-", "2000", "-1"})
        EXPECT_EQ(code_of([&] { parse_cpu_list(bad, "list"); }), ExitCode::bad_input) << bad;
}

TEST(CpuPool, SplitsAsMultiStreamModule) {
    const CpuPool pool{{0, 1, 2, 3, 4}};
    const std::vector<CpuPool> parts = split_pool(pool, 2);
    ASSERT_EQ(parts.size(), 2u);
    EXPECT_EQ(parts[0].cpus, (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(parts[1].cpus, (std::vector<int>{3, 4}));
    EXPECT_EQ(split_pool(pool, 5).back().cpus, (std::vector<int>{4}));
    EXPECT_EQ(code_of([&] { split_pool(pool, 0); }), ExitCode::usage);
    EXPECT_EQ(code_of([&] { split_pool(pool, 6); }), ExitCode::usage);
}

TEST(CpuPool, OnlyTheProcessCpus) {
    const std::vector<int> &cpus = process_cpus();
    ASSERT_FALSE(cpus.empty());
    EXPECT_EQ(pool_of_cpus({cpus.back(), cpus.front()}).cpus.front(), cpus.front());
    EXPECT_EQ(code_of([] { pool_of_cpus({}); }), ExitCode::usage);
    EXPECT_EQ(code_of([&] { pool_of_cpus({cpus.back() + 1}); }), ExitCode::usage);
    EXPECT_EQ(code_of([] { pool_of_node(4095); }), ExitCode::usage);
}

struct Seen {
    std::vector<int> cpus;
    int threads = 0;
};

TEST(Stream, RunsOnItsCpusWithItsOwnTeam) {
    const std::vector<int> &cpus = process_cpus();
    const std::vector<int> caller = thread_cpus();
    const int caller_threads = at::get_num_threads();
    for (const CpuPool &pool : {CpuPool{{cpus.back()}}, process_pool()}) {
        Stream stream(pool);
        const Seen seen = stream.submit([] {
                                   // a parallel op first: the team size must survive it
                                   at::parallel_for(0, 1024, 1, [](int64_t, int64_t) {});
                                   return Seen{thread_cpus(), at::get_num_threads()};
                               })
                              .get();
        EXPECT_EQ(seen.cpus, pool.cpus);
        EXPECT_EQ(seen.threads, static_cast<int>(pool.cpus.size()));
    }
    EXPECT_EQ(thread_cpus(), caller);
    EXPECT_EQ(at::get_num_threads(), caller_threads);
}

TEST(Stream, RunsInOrderAndPassesErrors) {
    Stream stream(CpuPool{{process_cpus().front()}});
    std::vector<int> order;
    std::vector<std::future<void>> done;
    for (int i = 0; i < 5; ++i) done.push_back(stream.submit([&order, i] { order.push_back(i); }));
    for (auto &f : done) f.get();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
    auto failed = stream.submit([]() -> int { throw std::runtime_error("broken request"); });
    EXPECT_THROW(failed.get(), std::runtime_error);
}

}  // namespace
}  // namespace ipex::runtime
