// kjit/error.hpp — the exceptions kjit throws. Every message says what was wrong and what to do.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace kjit {

/// Base of every kjit exception.
class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// Bad input from the caller: invalid constants, wrong launch arguments, unknown arch, …
class UsageError : public Error {
public:
    using Error::Error;
};

/// A CUDA driver call failed. `call()` names the API function, `code()` is its CUresult.
class CudaError : public Error {
public:
    CudaError(std::string call, int code, const std::string& reason);
    [[nodiscard]] const std::string& call() const noexcept { return call_; }
    [[nodiscard]] int code() const noexcept { return code_; }

private:
    std::string call_;
    int code_;
};

/// No libcuda or no device: compiling and caching still work, launching does not.
class NoDeviceError : public Error {
public:
    using Error::Error;
};

/// NVRTC rejected a kernel. Carries everything needed to fix it.
class CompileError : public Error {
public:
    CompileError(std::string readable_id, std::vector<std::string> options, std::string log,
                 std::string source_excerpt);
    [[nodiscard]] const std::string& readable_id() const noexcept { return readable_id_; }
    [[nodiscard]] const std::vector<std::string>& options() const noexcept { return options_; }
    [[nodiscard]] const std::string& log() const noexcept { return log_; }
    /// The generated source lines around the first error, numbered, the error line marked.
    [[nodiscard]] const std::string& source_excerpt() const noexcept { return excerpt_; }

private:
    std::string readable_id_;
    std::vector<std::string> options_;
    std::string log_;
    std::string excerpt_;
};

}  // namespace kjit
