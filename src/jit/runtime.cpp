// The Runtime: resolve a kernel through memory, SQLite or NVRTC (once per key, across threads
// and processes), load it on the device, remember it in the kernel's hot slot, check the launch
// (launch_checks.cpp) and hand it to the driver: cuLaunchKernel, or cuLaunchKernelEx for clusters and
// programmatic dependent launches.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <kjit/error.hpp>
#include <kjit/runtime.hpp>

#include "cuda/driver_api.hpp"
#include "jit/cache_key.hpp"
#include "jit/entry_point.hpp"
#include "jit/env_flag.hpp"
#include "jit/kernel_state.hpp"
#include "jit/launch_checks.hpp"
#include "jit/log.hpp"
#include "jit/parallel.hpp"
#include "jit/single_flight.hpp"

namespace kjit {
namespace {

struct DeviceKey {
    CacheKey key;
    int device;
    friend bool operator==(const DeviceKey&, const DeviceKey&) = default;
};
struct DeviceKeyHash {
    std::size_t operator()(const DeviceKey& k) const noexcept { return static_cast<std::size_t>(k.key.low) ^ k.device; }
};

std::atomic<std::uint64_t> next_runtime_id{1};

/// Nanoseconds since it was made.
class Stopwatch {
public:
    [[nodiscard]] std::uint64_t ns() const {
        return static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count());
    }

private:
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// How long a compile claim stands when its owner neither stores nor dies (e.g. it hangs, or
/// runs on another host sharing the database): far longer than any compile.
constexpr std::chrono::seconds claim_lifetime{600};

/// KJIT_DEPENDENT_LAUNCH=0 launches every kernel plainly (tools that do not follow griddepcontrol).
bool dependent_launches_allowed() {
    static const bool allowed = detail::env_flag("KJIT_DEPENDENT_LAUNCH", true);
    return allowed;
}

}  // namespace

/// How long a remote claim stands: its owner compiles one kernel, then publishes it.
constexpr std::chrono::seconds remote_claim_lifetime{120};

struct Runtime::Impl {
    Impl(const std::filesystem::path& dir, std::optional<RemoteOptions> remote_options) : cache(dir) {
        if (remote_options) remote.emplace(*std::move(remote_options));
    }
    ~Impl() {
        if (remote) settle_remote(remote->options().operation_timeout);
    }

    const std::uint64_t id = next_runtime_id++;
    Cache cache;
    std::optional<RemoteCache> remote;
    std::mutex settle_mutex;
    RemoteCounters recorded;  // what settle_remote has added to the file's totals
    detail::SingleFlight<CacheKey, std::shared_ptr<const CacheEntry>, detail::CacheKeyHash> compiled;
    detail::SingleFlight<DeviceKey, std::shared_ptr<const LoadedKernel>, DeviceKeyHash> loaded;
    std::atomic<std::uint64_t> memory_hits{0}, cache_hits{0}, remote_hits{0}, compiles{0}, loads{0};
    std::atomic<std::uint64_t> fetch_ns{0}, module_load_ns{0};  // RuntimeStats::fetch_ms, module_load_ms
    std::atomic<bool> autotune{detail::env_flag("KJIT_AUTOTUNE", false)};

    /// Thrown through `compiled` where a caller that does not wait meets another process's
    /// claim: not an error, and never memoised (SingleFlight keeps no failures).
    struct ClaimedElsewhere {};

    CompileResult compile(const Kernel& kernel, const CompileOptions& options) {
        for (;;) {
            try {
                return compile(kernel, options, Claims::wait);
            } catch (const ClaimedElsewhere&) {
                // A try_compile() of this process met the claim first and this call shared its
                // attempt: this one waits, as a plain compile does.
            }
        }
    }

    std::optional<CompileResult> try_compile(const Kernel& kernel, const CompileOptions& options) {
        try {
            return compile(kernel, options, Claims::pass);
        } catch (const ClaimedElsewhere&) {
            return std::nullopt;
        }
    }

    enum class Claims { wait, pass };

    CompileResult compile(const Kernel& kernel, const CompileOptions& options, Claims claims) {
        const CacheKey key = kernel.key(options);
        Origin origin = Origin::memory;
        auto [entry, shared] = compiled.get(key, [&] {
            if (auto hit = shared_entry(kernel, options, key, claims)) {
                origin = Origin::cache;
                return hit;
            }
            // This process holds the local claim: the remote tier next, then NVRTC.
            bool remote_claim = false;
            try {
                if (auto hit = remote_entry(kernel, options, key, claims, remote_claim)) {
                    origin = Origin::remote;
                    return hit;
                }
                origin = Origin::compiled;
                auto e = std::make_shared<CacheEntry>(
                    make_cache_entry(kernel, options, kjit::compile(kernel, options)));
                ++compiles;
                cache.store(*e);  // releases the claim
                detail::debug(
                    fmt::format("compiled {} for {} in {:.1f} ms", kernel.id(), e->arch, e->compiled.compile_ms));
                std::shared_ptr<const CacheEntry> stored(std::move(e));
                if (remote) remote->publish(stored);  // releases the remote claim once written
                return stored;
            } catch (...) {
                cache.release(key);  // let another process try (and report its own error)
                if (remote_claim) remote->release(key);
                throw;
            }
        });
        if (shared) ++memory_hits;
        return {std::move(entry), origin};
    }

    /// The entry from SQLite, or null once this process holds the claim to compile it. While
    /// another live process holds the claim, waits for its entry (NVRTC runs once per key across
    /// every process sharing the database) — or, with Claims::pass, throws ClaimedElsewhere.
    std::shared_ptr<const CacheEntry> shared_entry(const Kernel& kernel, const CompileOptions& options,
                                                   const CacheKey& key, Claims claims) {
        auto poll = std::chrono::milliseconds(2);
        for (bool announced = false;; poll = std::min(poll * 2, std::chrono::milliseconds(100))) {
            if (auto hit = cache.find(key)) {
                ++cache_hits;
                detail::debug(fmt::format("cache hit {} ({}) for {}", kernel.id(), key.hex(), options.arch.name()));
                return std::make_shared<const CacheEntry>(*std::move(hit));
            }
            switch (cache.claim(key, claim_lifetime)) {
                case Cache::Claim::owned:
                case Cache::Claim::unshared: return nullptr;
                case Cache::Claim::present:  // stored between find and claim; a row find() refused is replaced
                    if (auto hit = cache.find(key)) {
                        ++cache_hits;
                        return std::make_shared<const CacheEntry>(*std::move(hit));
                    }
                    return nullptr;
                case Cache::Claim::held:
                    if (claims == Claims::pass) throw ClaimedElsewhere{};
                    if (!announced)
                        detail::debug(fmt::format("{} for {} is being compiled by another process: waiting",
                                                  kernel.id(), options.arch.name()));
                    announced = true;
                    std::this_thread::sleep_for(poll);
            }
        }
    }

    /// The entry from the remote tier (verified, then stored into SQLite), or null once this
    /// process may compile it: the remote has no entry and this process holds the remote claim
    /// (`claimed`), or there is no claim to be had (a reader, the server unreachable). While
    /// another machine holds the claim, waits for its entry — or, with Claims::pass, throws
    /// ClaimedElsewhere.
    std::shared_ptr<const CacheEntry> remote_entry(const Kernel& kernel, const CompileOptions& options,
                                                   const CacheKey& key, Claims claims, bool& claimed) {
        if (!remote) return nullptr;
        const auto fetched = [&]() -> std::shared_ptr<const CacheEntry> {
            auto hit = remote->fetch(key);
            if (!hit) return nullptr;
            ++remote_hits;
            detail::debug(fmt::format("remote hit {} ({}) for {}", kernel.id(), key.hex(), options.arch.name()));
            cache.store(*hit);  // releases the local claim
            return std::make_shared<const CacheEntry>(*std::move(hit));
        };
        auto poll = std::chrono::milliseconds(20);
        for (bool announced = false;; poll = std::min(poll * 2, std::chrono::milliseconds(500))) {
            if (auto hit = fetched()) return hit;
            switch (remote->claim(key, remote_claim_lifetime)) {
                case RemoteCache::Claim::owned:
                    // Its last holder may have published and let go between the fetch and the claim.
                    if (auto hit = fetched()) {
                        remote->release(key);
                        return hit;
                    }
                    claimed = true;
                    return nullptr;
                case RemoteCache::Claim::unshared: return nullptr;
                case RemoteCache::Claim::held:
                    if (claims == Claims::pass) throw ClaimedElsewhere{};  // compile() drops the local claim
                    if (!announced)
                        detail::debug(fmt::format("{} for {} is being compiled by another machine: waiting",
                                                  kernel.id(), options.arch.name()));
                    announced = true;
                    std::this_thread::sleep_for(poll);
            }
        }
    }

    void settle_remote(std::chrono::milliseconds timeout) noexcept {
        if (!remote) return;
        std::lock_guard lock(settle_mutex);
        try {
            remote->flush(timeout);
            const RemoteCounters now = remote->counters();
            if (const RemoteCounters added = now - recorded; !(added == RemoteCounters{})) {
                cache.add_remote_counters(added);
                recorded = now;
            }
        } catch (const std::exception& e) {
            detail::debug(fmt::format("not recording the remote tier's counters: {}", e.what()));
        }
    }

    /// What loading needs: the entry this process already holds, else the cubin alone from
    /// SQLite (PTX is the larger part of an entry), else a compile.
    std::shared_ptr<const CacheEntry> for_loading(const Kernel& kernel, const CompileOptions& options,
                                                  const CacheKey& key) {
        if (auto held = compiled.ready(key)) return *std::move(held);
        if (auto hit = cache.find(key, Cache::Blobs::cubin)) {
            ++cache_hits;
            return std::make_shared<const CacheEntry>(*std::move(hit));
        }
        return compile(kernel, options).entry;
    }

    const LoadedKernel& load(const Kernel& kernel, const Device& device, const CompileOptions& options) {
        if (!kernel.runs_on(device.arch()))
            throw UsageError(fmt::format("{} is built for {} only; {} is {}: pick another configuration for it",
                                         kernel.id(), kernel.only_for()->name(), device.name(), device.arch().name()));
        const DeviceKey key{kernel.key(options), device.ordinal()};
        auto [loaded_kernel, shared] = loaded.get(key, [&] {
            Stopwatch fetching;
            auto entry = for_loading(kernel, options, key.key);
            fetch_ns += fetching.ns();
            Stopwatch loading;
            std::optional<Module> module;
            auto try_load = [&]() -> std::optional<CudaError> {
                try {
                    module.emplace(device, entry->compiled.cubin, entry->compiled.ptx);
                    return std::nullopt;
                } catch (const CudaError& e) {
                    return e;
                }
            };
            Arch built_for = options.arch;
            auto failure = try_load();
            if (failure && entry->compiled.ptx.empty()) {  // read without its PTX: fetch it for the driver's JIT
                entry = compile(kernel, options).entry;
                failure = try_load();
            }
            if (failure) {
                const Arch native_arch = kernel.target(device.arch());
                if (options.arch == native_arch) throw *failure;
                detail::warn(fmt::format("{} built for {} does not load on {} ({}): {}; recompiling for {}",
                                         kernel.id(), options.arch.name(), device.name(), device.arch().name(),
                                         failure->what(), native_arch.name()));
                CompileOptions native = options;
                native.arch = built_for = native_arch;
                entry = compile(kernel, native).entry;
                module.emplace(device, entry->compiled.cubin, entry->compiled.ptx);
            }
            auto* fn = module->function(kernel.entry_point_name());
            module_load_ns += loading.ns();  // with any recompile for the device's own arch
            ++loads;
            return std::make_shared<const LoadedKernel>(*std::move(module), fn, std::move(entry), built_for);
        });
        if (shared) ++memory_hits;
        return *loaded_kernel;  // owned by `loaded` for the runtime's life
    }

    /// The loaded kernel, through the kernel's hot slot when it matches this runtime and device.
    const LoadedKernel& resolve(const Kernel& kernel, const Device& device) {
        const auto& state = kernel.state();
        if (const auto* hot = state.hot.load(std::memory_order_acquire);
            hot && hot->runtime_id == id && hot->device == device.ordinal()) {
            memory_hits.fetch_add(1, std::memory_order_relaxed);
            return *hot->loaded;
        }
        const LoadedKernel& lk = load(kernel, device, CompileOptions{.arch = kernel.target(device.arch())});
        std::lock_guard lock(state.memo_mutex);
        const detail::HotSlot* slot = nullptr;
        for (const auto& s : state.hot_slots)
            if (s->runtime_id == id && s->device == device.ordinal()) slot = s.get();
        if (!slot) {
            state.hot_slots.push_back(std::make_unique<detail::HotSlot>(detail::HotSlot{id, device.ordinal(), &lk}));
            slot = state.hot_slots.back().get();
        }
        state.hot.store(slot, std::memory_order_release);
        return lk;
    }

    void launch(const Kernel& kernel, const Stream& stream, const LaunchConfig& config, void** args) {
        launch(kernel, resolve(kernel, stream.device()), stream, config, args);
    }

    /// Whether a grid whose entry point lets the next grid launch at once fills more than half of
    /// the blocks the device holds at a time, but not more than all of them. Launched as a
    /// dependent, its blocks are placed on whatever slots the grid before leaves, unevenly where
    /// they are most of them: on the H200 such grids took 1.18-1.28x as long back to back as
    /// launched plainly (dw 3x3 192 @28 b8, dw 3x3 s2 576 @14 b8, g32 3x3 s2 512 @28 b8), where
    /// smaller grids gained up to 0.8x and larger ones broke even (docs/BENCHMARKS.md).
    static bool crowds_the_device(const Kernel& kernel, const LoadedKernel& lk, const Device& device,
                                  const LaunchConfig& c) {
        if (kernel.state().waits_in_body) return false;  // it lets the next grid launch when it chooses
        const std::uint64_t threads = 1ULL * c.block.x * c.block.y * c.block.z;
        const std::uint64_t shape = threads << 40 | std::uint64_t{c.shared_bytes} << 8;
        std::uint64_t memo = lk.occupancy.load(std::memory_order_relaxed);
        if (memo == 0 || (memo & ~std::uint64_t{0xff}) != shape) {
            int per_sm = 0;
            KJIT_CU(cuOccupancyMaxActiveBlocksPerMultiprocessor, &per_sm, lk.function, static_cast<int>(threads),
                    static_cast<std::size_t>(c.shared_bytes));
            memo = shape | static_cast<std::uint64_t>(std::clamp(per_sm, 0, 255));
            lk.occupancy.store(memo, std::memory_order_relaxed);
        }
        const std::uint64_t per_sm = memo & 0xff,
                            slots = per_sm * static_cast<std::uint64_t>(device.multiprocessor_count());
        const std::uint64_t blocks = 1ULL * c.grid.x * c.grid.y * c.grid.z;
        return per_sm >= 2 && 2 * blocks > slots && blocks <= slots;
    }

    static void launch(const Kernel& kernel, const LoadedKernel& lk, const Stream& stream, const LaunchConfig& config,
                       void** args) {
        const Device& device = stream.device();
        detail::check_launch(kernel, lk, device, config);
        device.make_current();
        const bool clustered = config.cluster.x * config.cluster.y * config.cluster.z != 1;
        // Clusters launch plainly: on the H200, split-K clusters launched as dependents took up to
        // 1.4x as long back to back (docs/BENCHMARKS.md), where persistent kernels gained 15%.
        // So do grids that crowd the device (below).
        if (!clustered && (!lk.dependent_launch || crowds_the_device(kernel, lk, device, config))) {
            KJIT_CU(cuLaunchKernel, lk.function, config.grid.x, config.grid.y, config.grid.z, config.block.x,
                    config.block.y, config.block.z, config.shared_bytes, stream.handle(), args, nullptr);
            return;
        }
        CUlaunchAttribute attribute{};
        if (clustered) {
            attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
            attribute.value.clusterDim.x = config.cluster.x;
            attribute.value.clusterDim.y = config.cluster.y;
            attribute.value.clusterDim.z = config.cluster.z;
        } else {  // a dependent: safe after any grid, since the kernel waits for it to finish
            attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attribute.value.programmaticStreamSerializationAllowed = 1;
        }
        CUlaunchConfig launch{};
        launch.gridDimX = config.grid.x;
        launch.gridDimY = config.grid.y;
        launch.gridDimZ = config.grid.z;
        launch.blockDimX = config.block.x;
        launch.blockDimY = config.block.y;
        launch.blockDimZ = config.block.z;
        launch.sharedMemBytes = config.shared_bytes;
        launch.hStream = stream.handle();
        launch.attrs = &attribute;
        launch.numAttrs = 1;
        KJIT_CU(cuLaunchKernelEx, &launch, lk.function, args, nullptr);
    }
};

LoadedKernel::LoadedKernel(Module loaded_module, CUfunc_st* entry_function,
                           std::shared_ptr<const CacheEntry> cache_entry, Arch built_for)
    : module(std::move(loaded_module)),
      function(entry_function),
      entry(std::move(cache_entry)),
      dependent_launch(built_for.number() >= detail::grid_dependency_arch && dependent_launches_allowed()) {}

Runtime::Runtime(const std::filesystem::path& cache_directory)
    : Runtime(cache_directory, RemoteOptions::from_environment()) {}
Runtime::Runtime(const std::filesystem::path& cache_directory, std::optional<RemoteOptions> remote)
    : impl_(std::make_unique<Impl>(cache_directory, std::move(remote))) {}
Runtime::~Runtime() = default;

Runtime& Runtime::global() {
    static Runtime* runtime = [] {
        auto* r = new Runtime(Cache::default_directory());  // never destroyed: see header
        std::atexit([] {  // but its publishes are written and its database closed cleanly
            Runtime& g = global();
            if (auto* remote = g.remote()) g.settle_remote(remote->options().operation_timeout);
            g.cache().close();
        });
        return r;
    }();
    return *runtime;
}

CompileResult Runtime::compile(const Kernel& kernel, const CompileOptions& options) {
    return impl_->compile(kernel, options);
}

std::optional<CompileResult> Runtime::try_compile(const Kernel& kernel, const CompileOptions& options) {
    return impl_->try_compile(kernel, options);
}

namespace {

/// work(k) for each of `kernels` once per id, on all cores; once all are done, the first
/// failure is rethrown.
template <class Work>
void for_each_distinct_in_parallel(std::span<const Kernel* const> kernels, Work&& work) {
    std::vector<const Kernel*> distinct;
    std::set<std::string_view> ids;
    for (const Kernel* k : kernels)
        if (ids.insert(k->id()).second) distinct.push_back(k);
    detail::parallel_for(distinct.size(), [&](std::size_t i) { work(*distinct[i]); });
}

}  // namespace

void Runtime::compile_all(std::span<const Kernel* const> kernels, Arch device) {
    for_each_distinct_in_parallel(kernels,
                                  [&](const Kernel& k) { (void)compile(k, CompileOptions{.arch = k.target(device)}); });
}

const LoadedKernel& Runtime::load(const Kernel& kernel, const Device& device) { return impl_->resolve(kernel, device); }

void Runtime::load_all(std::span<const Kernel* const> kernels, const Device& device) {
    for_each_distinct_in_parallel(kernels, [&](const Kernel& k) { (void)load(k, device); });
}

const LoadedKernel& Runtime::load(const Kernel& kernel, const Device& device, const CompileOptions& options) {
    return impl_->load(kernel, device, options);
}

void Runtime::launch(const Kernel& kernel, const Stream& stream, const LaunchConfig& config,
                     std::span<const Arg> args) {
    ArgPack pack(kernel.params(), kernel.id());
    for (const Arg& arg : args) pack.push(arg);
    pack.check_complete();
    impl_->launch(kernel, stream, config, pack.data());
}

void Runtime::launch_packed(const Kernel& kernel, const Stream& stream, const LaunchConfig& config, void** args) {
    impl_->launch(kernel, stream, config, args);
}

void Runtime::launch_packed(const Kernel& kernel, const LoadedKernel& loaded, const Stream& stream,
                            const LaunchConfig& config, void** args) {
    if (loaded.module.device().ordinal() != stream.device().ordinal())
        throw UsageError(fmt::format("{} was loaded on device {} but launched on a stream of device {}", kernel.id(),
                                     loaded.module.device().ordinal(), stream.device().ordinal()));
    Impl::launch(kernel, loaded, stream, config, args);
}

RuntimeStats Runtime::stats() const noexcept {
    return {impl_->memory_hits.load(),
            impl_->cache_hits.load(),
            impl_->remote_hits.load(),
            impl_->compiles.load(),
            impl_->loads.load(),
            impl_->fetch_ns.load() / 1e6,
            impl_->module_load_ns.load() / 1e6};
}

Cache& Runtime::cache() noexcept { return impl_->cache; }
RemoteCache* Runtime::remote() noexcept { return impl_->remote ? &*impl_->remote : nullptr; }
void Runtime::settle_remote(std::chrono::milliseconds timeout) noexcept { impl_->settle_remote(timeout); }
bool Runtime::autotune() const noexcept { return impl_->autotune; }
void Runtime::set_autotune(bool on) noexcept { impl_->autotune = on; }

void Kernel::launch(const Stream& stream, const LaunchConfig& config, std::span<const Arg> args) const {
    Runtime::global().launch(*this, stream, config, args);
}

void Kernel::launch_packed(const Stream& stream, const LaunchConfig& config, void** args) const {
    Runtime::global().launch_packed(*this, stream, config, args);
}

}  // namespace kjit
