// kjit/runtime.hpp — the compile-and-load service: memory, SQLite and (optionally) Redis tiers, single-flight, launches.
#pragma once
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include <kjit/args.hpp>
#include <kjit/cache.hpp>
#include <kjit/compile.hpp>
#include <kjit/driver.hpp>
#include <kjit/kernel.hpp>
#include <kjit/remote.hpp>

namespace kjit {

/// Grid, block, dynamic shared memory and thread-block cluster of one launch. kjit raises the
/// function's dynamic shared-memory limit itself when more than 48 KB is asked for. Clusters
/// larger than one block need sm_90 or newer; the grid must be a multiple of the cluster.
struct LaunchConfig {
    Dim3 grid;
    Dim3 block;
    unsigned shared_bytes = 0;
    Dim3 cluster{};
};

/// Where a compiled kernel came from.
enum class Origin { memory, cache, remote, compiled };

/// A compiled kernel (from a cache tier or NVRTC).
struct CompileResult {
    std::shared_ptr<const CacheEntry> entry;
    Origin origin;
};

/// An entry point loaded on a device.
struct LoadedKernel {
    /// `built_for`: the arch the cubin was compiled for (an Arch, not the entry's name: parsing
    /// a suffixed name asks NVRTC, whose start costs a warm process tens of milliseconds).
    LoadedKernel(Module loaded_module, CUfunc_st* entry_function, std::shared_ptr<const CacheEntry> cache_entry,
                 Arch built_for);

    Module module;
    CUfunc_st* function;
    std::shared_ptr<const CacheEntry> entry;
    /// Built for sm_90 or newer, so it waits for the grid before it (griddepcontrol, in its entry
    /// point or, with KernelSpec::waits_in_body, in its body):
    /// launched as a programmatic dependent (clusters excepted), its blocks start while that grid
    /// drains. Off for every kernel when KJIT_DEPENDENT_LAUNCH=0.
    bool dependent_launch;
    mutable std::atomic<unsigned> dynamic_shared_limit{48 * 1024};  // what the driver allows now
    /// Blocks of it one multiprocessor holds at once, for the last launch shape asked about:
    /// threads << 40 | dynamic shared bytes << 8 | blocks (0: not asked yet).
    mutable std::atomic<std::uint64_t> occupancy{0};
};

/// Counters since the Runtime was made.
struct RuntimeStats {
    std::uint64_t memory_hits = 0;  ///< served by the in-process map
    std::uint64_t cache_hits = 0;   ///< served by SQLite
    std::uint64_t remote_hits = 0;  ///< served by the remote tier (and stored into SQLite)
    std::uint64_t compiles = 0;     ///< NVRTC runs
    std::uint64_t loads = 0;        ///< modules loaded onto a device
    /// Of those loads, wall time summed over the threads that did them: getting each binary (from
    /// SQLite, the remote tier or NVRTC), and the driver loading it (module and function).
    double fetch_ms = 0, module_load_ms = 0;
};

/// Compiles, caches and loads kernels. One per process is usual (global()); tests and tools
/// may make their own over another cache directory. Thread-safe.
class Runtime {
public:
    /// The runtime over `cache_directory`, with the remote tier KJIT_REMOTE names, if any
    /// (RemoteOptions::from_environment; UsageError when its settings are wrong).
    explicit Runtime(const std::filesystem::path& cache_directory);
    /// The runtime over `cache_directory` with this remote tier (none: SQLite alone).
    Runtime(const std::filesystem::path& cache_directory, std::optional<RemoteOptions> remote);
    ~Runtime();
    Runtime(const Runtime&) = delete;
    Runtime& operator=(const Runtime&) = delete;

    /// The process-wide runtime over Cache::default_directory(). Never destroyed, so modules
    /// are not unloaded after the driver has shut down.
    static Runtime& global();

    /// The compiled kernel for `options`: from memory, else SQLite, else the remote tier (stored
    /// into SQLite), else NVRTC (stored, and published by a read-write remote). Concurrent calls
    /// for one missing key run NVRTC once — across processes sharing the database, and across
    /// machines sharing a read-write remote. Needs no GPU.
    [[nodiscard]] CompileResult compile(const Kernel& kernel, const CompileOptions& options);
    /// compile(), but where another live process holds the claim to compile this key (it is
    /// compiling it now), nothing instead of waiting for its entry: a caller with other work
    /// (`kjit warm`) does that first and comes back.
    [[nodiscard]] std::optional<CompileResult> try_compile(const Kernel& kernel, const CompileOptions& options);
    /// compile() for each of `kernels` (once per id) at its target on a device of arch `device`,
    /// in parallel on all cores; once all are done, the first failure is rethrown. Needs no GPU.
    void compile_all(std::span<const Kernel* const> kernels, Arch device);

    /// The kernel's entry point on `device`, compiled for the device's arch.
    [[nodiscard]] const LoadedKernel& load(const Kernel& kernel, const Device& device);
    /// load() for each of `kernels` (once per id), in parallel on all cores: a model's modules
    /// load at once rather than one after another. The first failure is rethrown.
    void load_all(std::span<const Kernel* const> kernels, const Device& device);
    /// The entry point compiled with `options` (e.g. for another arch, as a shipped cache holds
    /// it). A cubin that does not fit the device is replaced by its PTX; when the PTX does not
    /// load either, kjit recompiles for the device's arch and says so.
    [[nodiscard]] const LoadedKernel& load(const Kernel& kernel, const Device& device, const CompileOptions& options);

    /// Checked launch (argument count and types against the kernel's signature).
    void launch(const Kernel& kernel, const Stream& stream, const LaunchConfig& config, std::span<const Arg> args);
    /// Launch with pre-packed arguments; `args` must match the kernel's signature.
    void launch_packed(const Kernel& kernel, const Stream& stream, const LaunchConfig& config, void** args);
    /// Launch of an entry point loaded with load(kernel, device, options), e.g. with defines.
    void launch_packed(const Kernel& kernel, const LoadedKernel& loaded, const Stream& stream,
                       const LaunchConfig& config, void** args);

    [[nodiscard]] RuntimeStats stats() const noexcept;
    [[nodiscard]] Cache& cache() noexcept;
    /// The remote tier, or null.
    [[nodiscard]] RemoteCache* remote() noexcept;
    /// Waits (up to `timeout`) for the remote tier's queued publishes, then adds its counters
    /// since the last call to the cache file's totals (`kjit cache stats`). The destructor and
    /// global()'s exit handler do this; a tool that reports what it published calls it first.
    void settle_remote(std::chrono::milliseconds timeout) noexcept;

    /// The tuning policy: whether a conv layer with no stored winner is tuned the first time
    /// dispatch_conv2d_bn_silu(…, runtime, stream) meets it (kjit/conv_tuning.hpp) rather than
    /// given the heuristic's pick. Off unless KJIT_AUTOTUNE is on (1, true, yes, on) when the
    /// runtime is made; set_autotune changes it.
    [[nodiscard]] bool autotune() const noexcept;
    void set_autotune(bool on) noexcept;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace kjit
