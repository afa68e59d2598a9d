// Single-flight memo: the first caller for a key computes the value; concurrent callers for the
// same key wait for that result instead of computing it again. Failures are not memoised.
#pragma once
#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>

namespace kjit::detail {

template <class Key, class Value, class Hash>
class SingleFlight {
public:
    /// The value for `key` and whether it was already there (or being made by another thread).
    /// A hit takes the lock, one map lookup and a copy of the value: nothing is allocated.
    template <class Make>
    std::pair<Value, bool> get(const Key& key, Make&& make) {
        std::unique_lock lock(mutex_);
        if (auto it = futures_.find(key); it != futures_.end()) {
            auto future = it->second;
            lock.unlock();  // wait without holding the map
            return {future.get(), true};
        }
        std::promise<Value> promise;
        futures_.emplace(key, promise.get_future().share());
        lock.unlock();
        try {
            Value value = std::forward<Make>(make)();
            promise.set_value(value);
            return {std::move(value), false};
        } catch (...) {
            promise.set_exception(std::current_exception());
            std::lock_guard relock(mutex_);
            futures_.erase(key);  // the next caller tries again
            throw;
        }
    }

    /// The value for `key` if one was made successfully already; never waits, never makes one.
    std::optional<Value> ready(const Key& key) {
        std::lock_guard lock(mutex_);
        auto it = futures_.find(key);
        if (it == futures_.end() || it->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
            return std::nullopt;
        try {
            return it->second.get();
        } catch (...) {
            return std::nullopt;  // a failure still in the map: get() reports it to its own callers
        }
    }

private:
    std::mutex mutex_;
    std::unordered_map<Key, std::shared_future<Value>, Hash> futures_;
};

}  // namespace kjit::detail
