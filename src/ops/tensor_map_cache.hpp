// The tensor maps a Hopper op (conv, attention) built, kept per pointer set and shape: a graph calls an op
// with one set, so each map is encoded once; the bound keeps an op called with fresh buffers
// every time from growing.
#pragma once
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>

#include <kjit/tensor_map.hpp>

namespace kjit::detail {

/// x, w and y's maps for one call's plan (a type with `same_maps(const Plan&)`).
template <class Plan>
struct CallMaps {
    Plan plan;
    TensorMap x, w, y;  // empty where the kernel reads or writes that tensor through a pointer
};

/// Maps: what is kept for a plan (a `plan` member and the maps; CallMaps for conv's three).
template <class Plan, class Maps = CallMaps<Plan>>
class TensorMapCache {
public:
    /// The maps of `plan`, encoded by `encode(plan)` (returning Maps) the first time a plan with
    /// the same maps comes. Packed arguments point into the entry: it stays put.
    template <class Encode>
    const Maps& get(const Plan& plan, Encode encode) {
        std::lock_guard lock(mutex_);
        for (const auto& m : maps_)
            if (m->plan.same_maps(plan)) return *m;
        if (maps_.size() == capacity) maps_.pop_front();
        maps_.push_back(std::make_unique<Maps>(encode(plan)));
        return *maps_.back();
    }

private:
    static constexpr std::size_t capacity = 64;
    std::mutex mutex_;
    std::deque<std::unique_ptr<Maps>> maps_;
};

}  // namespace kjit::detail
