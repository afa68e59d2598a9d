// Devices: each one's record (name, arch, limits) and its retained primary context, kept for the process.
#include <cctype>
#include <deque>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <sstream>

#include <fmt/format.h>
#include <kjit/driver.hpp>
#include <kjit/error.hpp>

#include "cuda/driver_api.hpp"

namespace kjit {
namespace detail {

/// Retains a device's primary context; releases it when destroyed.
class PrimaryContext {
public:
    explicit PrimaryContext(CUdevice device) : device_(device) { KJIT_CU(cuDevicePrimaryCtxRetain, &context_, device); }
    ~PrimaryContext() { driver().cuDevicePrimaryCtxRelease(device_); }
    PrimaryContext(const PrimaryContext&) = delete;
    PrimaryContext& operator=(const PrimaryContext&) = delete;
    [[nodiscard]] CUcontext get() const noexcept { return context_; }

private:
    CUdevice device_;
    CUcontext context_ = nullptr;
};

struct DeviceRecord {
    int ordinal;
    PrimaryContext context;
    std::string name;
    Arch arch;
    int multiprocessors;
    int max_shared_optin;
};

namespace {
int attribute(CUdevice device, CUdevice_attribute which) {
    int value = 0;
    KJIT_CU(cuDeviceGetAttribute, &value, which, device);
    return value;
}

void make_current(CUcontext context) {
    CUcontext current = nullptr;
    KJIT_CU(cuCtxGetCurrent, &current);
    if (current != context) KJIT_CU(cuCtxSetCurrent, context);
}
}  // namespace
}  // namespace detail

Device Device::get(int ordinal) {
    // Records live for the whole process: primary contexts stay retained, so handles never dangle.
    static auto* records = new std::deque<std::unique_ptr<detail::DeviceRecord>>();
    static std::mutex mutex;
    (void)detail::driver();  // throws NoDeviceError, saying why, where there is no driver
    std::lock_guard lock(mutex);
    for (const auto& r : *records)
        if (r->ordinal == ordinal) return Device(r.get());
    int count = 0;
    KJIT_CU(cuDeviceGetCount, &count);
    if (ordinal < 0 || ordinal >= count)
        throw NoDeviceError(
            fmt::format("no CUDA device {}: this machine has {} (valid ordinals 0..{})", ordinal, count, count - 1));
    CUdevice device = 0;
    KJIT_CU(cuDeviceGet, &device, ordinal);
    char name[256] = {};
    KJIT_CU(cuDeviceGetName, name, static_cast<int>(sizeof name), device);
    records->push_back(std::unique_ptr<detail::DeviceRecord>(
        new detail::DeviceRecord{ordinal, detail::PrimaryContext(device), name,
                                 Arch(detail::attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                                      detail::attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)),
                                 detail::attribute(device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
                                 detail::attribute(device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)}));
    return Device(records->back().get());
}

int Device::ordinal() const noexcept { return record_->ordinal; }
const std::string& Device::name() const noexcept { return record_->name; }

namespace detail {
std::string module_version(std::string_view proc_text) {
    std::istringstream words{std::string(proc_text)};
    bool after_module = false;
    for (std::string word; words >> word;) {
        if (word == "Module") after_module = true;
        else if (after_module && std::isdigit(static_cast<unsigned char>(word[0])) &&
                 word.find('.') != std::string::npos)
            return word;
    }
    return {};
}
}  // namespace detail

std::string driver_version() {
    static const std::string version = [] {
        int cuda = 0;
        KJIT_CU(cuDriverGetVersion, &cuda);  // loads the driver: NoDeviceError without one
        std::ifstream proc("/proc/driver/nvidia/version");
        const std::string text((std::istreambuf_iterator<char>(proc)), std::istreambuf_iterator<char>());
        std::string module = detail::module_version(text);
        return module.empty() ? fmt::format("CUDA {}.{}", cuda / 1000, cuda % 1000 / 10) : module;
    }();
    return version;
}
Arch Device::arch() const noexcept { return record_->arch; }
int Device::multiprocessor_count() const noexcept { return record_->multiprocessors; }
int Device::max_shared_bytes_per_block() const noexcept { return record_->max_shared_optin; }
CUctx_st* Device::context() const noexcept { return record_->context.get(); }
void Device::make_current() const { detail::make_current(context()); }
void Device::synchronize() const {
    make_current();
    KJIT_CU(cuCtxSynchronize);
}

}  // namespace kjit
