// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1"), so kjit links and
// compiles kernels where no driver exists.
#pragma once
#include <cuda.h>

#include <kjit/driver.hpp>

namespace kjit::detail {

// The table is wrapped by hand.
// clang-format off
#define KJIT_DRIVER_FUNCTIONS(X)                                                                                     \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount) X(cuDeviceGet)         \
    X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)              \
    X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxSynchronize) X(cuModuleLoadDataEx) X(cuModuleUnload)                \
    X(cuModuleGetFunction) X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuLaunchKernelEx)         \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                                                                   \
    X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD)           \
    X(cuMemcpyDtoH) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize)                        \
    X(cuEventElapsedTime) X(cuStreamBeginCapture) X(cuStreamEndCapture) X(cuGraphInstantiate) X(cuGraphLaunch)       \
    X(cuGraphExecDestroy) X(cuGraphDestroy) X(cuMemcpy2DAsync) X(cuMemsetD8Async) X(cuTensorMapEncodeTiled)        \
    X(cuTensorMapEncodeIm2col)                                                                                       \
    X(cuPointerGetAttribute) X(cuCtxPushCurrent) X(cuCtxPopCurrent) X(cuStreamIsCapturing)
// clang-format on

/// Function pointers into libcuda, typed from cuda.h's own prototypes.
struct Driver {
#define KJIT_DECLARE(name) decltype(&::name) name = nullptr;
    KJIT_DRIVER_FUNCTIONS(KJIT_DECLARE)
#undef KJIT_DECLARE
};

/// The loaded, initialised driver. Throws NoDeviceError saying why when there is none.
const Driver& driver();

/// Where a driver is loaded, NVRTC runs ptxas through the driver's compute cache
/// (~/.nv/ComputeCache); a hit there skips ptxas, and its resource report goes missing from the
/// log. kjit has its own cache, so before its first compile and before its cuInit it sets
/// CUDA_CACHE_DISABLE=1, unless the environment already says otherwise.
void keep_ptxas_report();

/// Throws CudaError naming `call` and the driver's reason when `result` is not CUDA_SUCCESS.
void check(CUresult result, const char* call);

/// A handle from a create function (cuStreamCreate, cuMemAlloc, …: its first parameter is
/// where the handle goes) called with `device`'s context current; throws CudaError naming `call`.
template <class Handle, class Fn, class... A>
Handle create_handle(const Device& device, Fn Driver::*create, const char* call, A... args) {
    device.make_current();
    Handle handle{};
    check((driver().*create)(&handle, args...), call);
    return handle;
}

/// Calls a release function (cuStreamDestroy, cuMemFree, …) for an owner's destructor:
/// never throws, ignores the result — a failure there has nowhere useful to go.
template <class Fn, class... A>
void release(Fn Driver::*fn, A... args) noexcept {
    try {
        (void)(driver().*fn)(args...);
    } catch (...) {}
}

/// The kernel module's version in the text of /proc/driver/nvidia/version: the first word after
/// "Module" that starts with a digit and holds a dot ("NVIDIA UNIX x86_64 Kernel Module
/// 580.159.04 …", "NVIDIA UNIX Open Kernel Module for x86_64  580.159.04 …"); empty if none.
[[nodiscard]] std::string module_version(std::string_view proc_text);

}  // namespace kjit::detail

/// Calls a driver function through the table and checks its result: KJIT_CU(cuMemFree, ptr).
#define KJIT_CU(name, ...) ::kjit::detail::check(::kjit::detail::driver().name(__VA_ARGS__), #name)
