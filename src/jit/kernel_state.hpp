// The shared, immutable state behind a Kernel, plus its memos (cache keys, resolved function).
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <kjit/compile.hpp>
#include <kjit/kernel.hpp>

struct CUfunc_st;

namespace kjit {
struct LoadedKernel;

namespace detail {

/// The function a kernel last resolved to, for one runtime and device: a launch that matches
/// it does no hashing, no map lookup and no SQL.
struct HotSlot {
    std::uint64_t runtime_id;
    int device;
    const LoadedKernel* loaded;
};

struct KernelState {
    std::string name;
    std::string id;
    std::string kernel_source;
    std::string entry_point_source;
    std::string source;
    std::string entry_point_name;
    std::vector<Constant> constants;
    std::vector<Param> params;
    unsigned max_threads_per_block = 0;
    std::optional<Arch> only_for;
    bool waits_in_body = false;  // KernelSpec::waits_in_body: it lets the next grid launch itself
    std::shared_ptr<const std::vector<SourceFile>> headers;  // shared by every kernel with the same includes
    CacheKey source_digest;                                  // XXH3-128 of source + headers, taken once at construction

    // Memos. Keys per distinct option list; hot slots live as long as the kernel state.
    mutable std::mutex memo_mutex;
    mutable std::vector<std::pair<CompileOptions, CacheKey>> keys;  // compared field by field: no strings built
    mutable std::vector<std::unique_ptr<HotSlot>> hot_slots;
    mutable std::atomic<const HotSlot*> hot{nullptr};
};

}  // namespace detail
}  // namespace kjit
