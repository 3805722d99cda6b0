// A stream: one worker thread pinned to a CPU pool with its own OpenMP team (cpu_pool.h),
// running what is submitted to it in order. `bench --streams` runs one model on several.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>

#include "runtime/cpu_pool.h"

namespace ipex::runtime {

class Stream {
public:
    // Starts the thread and pins it; a pool the kernel refuses is exit 2 here.
    explicit Stream(CpuPool pool, int threads = 0);
    // Runs what is queued, then joins.
    ~Stream();
    Stream(const Stream &) = delete;
    Stream &operator=(const Stream &) = delete;

    // Queues fn; its result (or exception) arrives through the future.
    template <class Fn>
    auto submit(Fn fn) -> std::future<std::invoke_result_t<Fn>> {
        auto task = std::make_shared<std::packaged_task<std::invoke_result_t<Fn>()>>(std::move(fn));
        auto result = task->get_future();
        enqueue([task] { (*task)(); });
        return result;
    }

    const CpuPool &pool() const { return pool_; }

private:
    void enqueue(std::function<void()> work);
    void loop(std::promise<void> &started);

    CpuPool pool_;
    int threads_;
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<std::function<void()>> queue_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace ipex::runtime
