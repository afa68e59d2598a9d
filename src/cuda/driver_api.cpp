#include "cuda/driver_api.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <variant>

#include <fmt/format.h>
#include <kjit/driver.hpp>
#include <kjit/error.hpp>

namespace kjit {

CudaError::CudaError(std::string call, int code, const std::string& reason)
    : Error(fmt::format("{} failed: {}", call, reason)), call_(std::move(call)), code_(code) {}

namespace detail {
namespace {

/// The driver, or the reason there is none. Loaded once; never unloaded.
const std::variant<Driver, std::string>& load() {
    static const std::variant<Driver, std::string> loaded = []() -> std::variant<Driver, std::string> {
        void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib)
            return fmt::format(
                "no CUDA driver: libcuda.so.1 could not be loaded ({}). Compiling, caching and "
                "inspecting kernels work without one; launching needs an NVIDIA GPU and its driver",
                dlerror());
        using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
        auto get_proc = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
        if (!get_proc)
            return std::string(
                "no usable CUDA driver: libcuda.so.1 lacks cuGetProcAddress_v2; install a driver "
                "for CUDA 12 or newer");
        keep_ptxas_report();  // the driver reads it in cuInit
        Driver d;
        std::string missing;
        // Ask for each function by the name cuda.h's macros map it to (cuGraphInstantiate is
        // cuGraphInstantiateWithFlags), without its _vN suffix, at the CUDA version whose headers
        // typed the pointer: that is the variant the pointer's type describes.
        auto resolve = [&](auto& fn, std::string name) {
            if (const auto v = name.rfind("_v"); v != std::string::npos && v + 2 < name.size() &&
                                                 name.find_first_not_of("0123456789", v + 2) == std::string::npos)
                name.erase(v);
            void* p = nullptr;
            CUdriverProcAddressQueryResult status{};
            if (get_proc(name.c_str(), &p, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS || !p)
                missing += (missing.empty() ? "" : ", ") + name;
            fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
        };
#define KJIT_NAME(name) #name
#define KJIT_EXPANDED_NAME(name) KJIT_NAME(name)
#define KJIT_RESOLVE(name) resolve(d.name, KJIT_EXPANDED_NAME(name));
        KJIT_DRIVER_FUNCTIONS(KJIT_RESOLVE)
#undef KJIT_RESOLVE
#undef KJIT_EXPANDED_NAME
#undef KJIT_NAME
        if (!missing.empty())
            return fmt::format("CUDA driver too old for this kjit (built against CUDA {}.{}): missing {}",
                               CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10, missing);
        if (const CUresult rc = d.cuInit(0); rc != CUDA_SUCCESS) {
            const char* text = nullptr;
            d.cuGetErrorString(rc, &text);
            return fmt::format("no CUDA device: cuInit failed: {} ({})", text ? text : "unknown error",
                               static_cast<int>(rc));
        }
        return d;
    }();
    return loaded;
}

}  // namespace

void keep_ptxas_report() {
    static std::once_flag once;
    std::call_once(once, [] { ::setenv("CUDA_CACHE_DISABLE", "1", /*overwrite=*/0); });
}

const Driver& driver() {
    const auto& loaded = load();
    if (const auto* reason = std::get_if<std::string>(&loaded)) throw NoDeviceError(*reason);
    return std::get<Driver>(loaded);
}

void check(CUresult result, const char* call) {
    if (result == CUDA_SUCCESS) return;
    const Driver& d = driver();
    const char* name = nullptr;
    const char* text = nullptr;
    d.cuGetErrorName(result, &name);
    d.cuGetErrorString(result, &text);
    throw CudaError(call, static_cast<int>(result),
                    fmt::format("{} ({})", text ? text : "unknown error", name ? name : std::to_string(result)));
}

}  // namespace detail

std::string device_unavailable_reason() {
    const auto& loaded = detail::load();
    if (const auto* reason = std::get_if<std::string>(&loaded)) return *reason;
    int count = 0;
    if (std::get<detail::Driver>(loaded).cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0)
        return "no CUDA device: the driver is loaded but reports no GPU";
    return {};
}

int device_count() noexcept {
    const auto& loaded = detail::load();
    const auto* d = std::get_if<detail::Driver>(&loaded);
    int count = 0;
    if (!d || d->cuDeviceGetCount(&count) != CUDA_SUCCESS) return 0;
    return count;
}

}  // namespace kjit
