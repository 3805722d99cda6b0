#include "runtime/stream.h"

namespace ipex::runtime {

Stream::Stream(CpuPool pool, int threads) : pool_(std::move(pool)), threads_(threads) {
    std::promise<void> started;
    std::future<void> pinned = started.get_future();
    thread_ = std::thread([this, &started] { loop(started); });
    try {
        pinned.get();
    } catch (...) {
        thread_.join();
        throw;
    }
}

Stream::~Stream() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    ready_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void Stream::enqueue(std::function<void()> work) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        queue_.push_back(std::move(work));
    }
    ready_.notify_one();
}

void Stream::loop(std::promise<void> &started) {
    try {
        pin_current_thread(pool_, threads_);
    } catch (...) {
        started.set_exception(std::current_exception());
        return;
    }
    started.set_value();
    for (;;) {
        std::function<void()> work;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;
            work = std::move(queue_.front());
            queue_.pop_front();
        }
        work();
    }
}

}  // namespace ipex::runtime
