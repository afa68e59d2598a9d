// Modules: the cubin onto the device, or the PTX through the driver's JIT when the cubin's arch
// does not fit the device.
#include <array>

#include <fmt/format.h>
#include <kjit/driver.hpp>
#include <kjit/error.hpp>

#include "cuda/driver_api.hpp"

namespace kjit {

void detail::unload_module(CUmod_st* module) noexcept { release(&Driver::cuModuleUnload, module); }

namespace {

bool arch_mismatch(CUresult rc) {
    return rc == CUDA_ERROR_NO_BINARY_FOR_GPU || rc == CUDA_ERROR_INVALID_IMAGE ||
           rc == CUDA_ERROR_UNSUPPORTED_PTX_VERSION || rc == CUDA_ERROR_INVALID_PTX;
}

}  // namespace

Module::Module(const Device& device, std::span<const std::byte> cubin, std::string_view ptx) : device_(device) {
    const auto& d = detail::driver();
    device.make_current();
    CUmodule module = nullptr;
    CUresult rc = cubin.empty() ? CUDA_ERROR_NO_BINARY_FOR_GPU
                                : d.cuModuleLoadDataEx(&module, cubin.data(), 0, nullptr, nullptr);
    if (rc == CUDA_SUCCESS) {
        module_ = decltype(module_)(module);
        return;
    }
    if (!arch_mismatch(rc) || ptx.empty()) detail::check(rc, "cuModuleLoadDataEx (cubin)");

    // The cubin was built for another arch: let the driver JIT the PTX, keeping its error log.
    const std::string text(ptx);  // PTX must be NUL-terminated
    std::array<char, 8192> error_log{};
    std::array<CUjit_option, 2> keys{CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    std::array<void*, 2> values{error_log.data(), reinterpret_cast<void*>(error_log.size())};
    rc = d.cuModuleLoadDataEx(&module, text.c_str(), static_cast<unsigned>(keys.size()), keys.data(), values.data());
    if (rc != CUDA_SUCCESS) {
        try {
            detail::check(rc, "cuModuleLoadDataEx (PTX)");
        } catch (const CudaError& e) {
            throw CudaError(e.call(), e.code(),
                            fmt::format("{}; the cubin did not fit {} ({}) either. JIT log: {}", e.what(),
                                        device.name(), device.arch().name(), error_log.data()));
        }
    }
    module_ = decltype(module_)(module);
    path_ = LoadPath::ptx;
}

CUfunc_st* Module::function(const std::string& name) const {
    CUfunction fn = nullptr;
    const CUresult rc = detail::driver().cuModuleGetFunction(&fn, module_.get(), name.c_str());
    if (rc == CUDA_ERROR_NOT_FOUND)
        throw CudaError(
            "cuModuleGetFunction", rc,
            fmt::format("the module has no entry point '{}': is the kernel declared extern \"C\" __global__?", name));
    detail::check(rc, "cuModuleGetFunction");
    return fn;
}

}  // namespace kjit
