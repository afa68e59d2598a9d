// Test helpers: temporary directories, captured log messages, the kernels the tests use.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <future>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <kjit/kjit.hpp>

namespace kjit::test {

/// A fresh directory under the system temp dir, removed with its contents on destruction.
class TempDir {
public:
    TempDir() {
        std::random_device rd;
        path_ = std::filesystem::temp_directory_path() / ("kjit-test-" + std::to_string(rd()) + std::to_string(rd()));
        std::filesystem::create_directories(path_);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    [[nodiscard]] const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

/// Collects kjit's warnings while alive.
class LogCapture {
public:
    LogCapture() {
        set_log_sink([this](LogLevel level, std::string_view message) {
            if (level != LogLevel::warning) return;
            std::lock_guard lock(mutex_);
            warnings_.emplace_back(message);
        });
    }
    ~LogCapture() { set_log_sink({}); }
    [[nodiscard]] std::vector<std::string> warnings() const {
        std::lock_guard lock(mutex_);
        return warnings_;
    }

private:
    mutable std::mutex mutex_;
    std::vector<std::string> warnings_;
};

/// The shipped axpby kernel for element type `t` and ITEMS items per thread.
inline Kernel axpby(Scalar t = Scalar::f32, std::int64_t items = 4) {
    return Kernel(KernelSpec{"axpby",
                             {{"T", t}, {"BLOCK", std::int64_t{256}}, {"ITEMS", items}},
                             {{"x", {t, true}}, {"y", {t, true}}, {"alpha", {t}}, {"beta", {t}}, {"n", {Scalar::i64}}},
                             256});
}

/// A caller-supplied kernel: out[i] = in[i] * FACTOR.
inline Kernel scale_kernel(const std::string& body_extra = "", int factor = 2) {
    const std::string body = body_extra +
                             "template <int FACTOR>\n"
                             "__device__ void scale(const float* in, float* out, int n) {\n"
                             "    const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                             "    if (i < n) out[i] = in[i] * FACTOR;\n"
                             "}\n";
    return Kernel(KernelSpec{"scale",
                             {{"FACTOR", std::int64_t{factor}}},
                             {{"in", {Scalar::f32, true}}, {"out", {Scalar::f32, true}}, {"n", {Scalar::i32}}}},
                  body);
}

/// The configurations a GPU test covers: all of them, or where KJIT_GPU_TEST_SAMPLE is set (the
/// compute-sanitizer runs, scripts/gpu-sanitize) the first and the last, which differ in every
/// tile dimension.
template <class T>
std::vector<T> configurations_to_test(std::span<const T> all) {
    const char* sample = std::getenv("KJIT_GPU_TEST_SAMPLE");
    if (!sample || !*sample || all.size() <= 2) return {all.begin(), all.end()};
    return {all.front(), all.back()};
}

inline CompileOptions options_for(std::string_view arch) {
    CompileOptions o;
    o.arch = Arch::parse(arch);
    return o;
}

/// One kernel to compile for one arch.
struct CompileJob {
    const Kernel* kernel;
    const char* arch;
};
/// Compiles every job, a few at a time (NVRTC runs in parallel; the machine has few cores), and
/// calls check(job, compiled) for each, in order, on this thread.
template <class Check>
void compile_each(std::span<const CompileJob> jobs, Check&& check) {
    const std::size_t width = std::max(2u, std::thread::hardware_concurrency());
    for (std::size_t first = 0; first < jobs.size(); first += width) {
        std::vector<std::future<Compiled>> running;
        for (std::size_t i = first; i < std::min(jobs.size(), first + width); ++i)
            running.push_back(std::async(std::launch::async,
                                         [&job = jobs[i]] { return compile(*job.kernel, options_for(job.arch)); }));
        for (std::size_t i = first; i < std::min(jobs.size(), first + width); ++i)
            check(jobs[i], running[i - first].get());
    }
}

}  // namespace kjit::test
