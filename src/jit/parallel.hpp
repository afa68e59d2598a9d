// Work spread over threads made for it: kernels compiled or loaded at once, a model's weights
// laid out for their upload.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace kjit::detail {

/// work(i) for every i in [0, n), on up to `threads` threads (all cores by default), each taking
/// the next index as it finishes one; once all are done, the first failure is rethrown.
template <class Work>
void parallel_for(std::size_t n, Work&& work, unsigned threads = std::thread::hardware_concurrency()) {
    std::atomic<std::size_t> next{0};
    std::mutex failure_mutex;
    std::exception_ptr failure;
    std::vector<std::jthread> workers(std::max<std::size_t>(1, std::min<std::size_t>(threads, n)));
    for (auto& w : workers)
        w = std::jthread([&] {
            for (std::size_t i; (i = next++) < n;) {
                try {
                    work(i);
                } catch (...) {
                    std::lock_guard lock(failure_mutex);
                    if (!failure) failure = std::current_exception();
                }
            }
        });
    workers.clear();  // joins
    if (failure) std::rethrow_exception(failure);
}

}  // namespace kjit::detail
