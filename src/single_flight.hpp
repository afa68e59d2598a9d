// Single-flight memo: the first caller for a key computes the value; concurrent callers for the
// same key wait for that result instead of computing it again. Failures are not memoised.
#pragma once
#include <functional>
#include <future>
#include <mutex>
#include <unordered_map>

namespace kjit::detail {

template <class Key, class Value, class Hash>
class SingleFlight {
public:
    /// The value for `key` and whether it was already there (or being made by another thread).
    std::pair<Value, bool> get(const Key& key, const std::function<Value()>& make) {
        std::promise<Value> promise;
        std::unique_lock lock(mutex_);
        auto [it, inserted] = futures_.try_emplace(key);
        if (!inserted) {
            auto future = it->second;
            lock.unlock();  // wait without holding the map
            return {future.get(), true};
        }
        it->second = promise.get_future().share();
        lock.unlock();
        try {
            Value value = make();
            promise.set_value(value);
            return {std::move(value), false};
        } catch (...) {
            promise.set_exception(std::current_exception());
            std::lock_guard lock(mutex_);
            futures_.erase(key);  // the next caller tries again
            throw;
        }
    }

private:
    std::mutex mutex_;
    std::unordered_map<Key, std::shared_future<Value>, Hash> futures_;
};

}  // namespace kjit::detail
