// The kernel object: the spec validated, its entry point and readable id generated, its
// sources collected and hashed once.
#include <algorithm>
#include <mutex>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <kjit/compile.hpp>
#include <kjit/error.hpp>
#include <kjit/kernel.hpp>
#include <kjit/typed_kernel.hpp>

#include "jit/cache_key.hpp"
#include "jit/entry_point.hpp"
#include "jit/kernel_sources.hpp"
#include "jit/kernel_state.hpp"

namespace kjit {

std::string_view short_name(Scalar s) noexcept {
    switch (s) {
        case Scalar::boolean: return "bool";
        case Scalar::u8: return "u8";
        case Scalar::i32: return "i32";
        case Scalar::i64: return "i64";
        case Scalar::u32: return "u32";
        case Scalar::u64: return "u64";
        case Scalar::f16: return "f16";
        case Scalar::bf16: return "bf16";
        case Scalar::f32: return "f32";
        case Scalar::f64: return "f64";
        case Scalar::tensor_map: return "tensormap";
    }
    return "?";
}

std::string_view cuda_type(Scalar s) noexcept {
    switch (s) {
        case Scalar::boolean: return "bool";
        case Scalar::u8: return "unsigned char";
        case Scalar::i32: return "int";
        case Scalar::i64: return "long long";
        case Scalar::u32: return "unsigned int";
        case Scalar::u64: return "unsigned long long";
        case Scalar::f16: return "kjit::f16";
        case Scalar::bf16: return "kjit::bf16";
        case Scalar::f32: return "float";
        case Scalar::f64: return "double";
        case Scalar::tensor_map: return "kjit::TensorMap";
    }
    return "?";
}

std::size_t byte_size(Scalar s) noexcept {
    switch (s) {
        case Scalar::boolean:
        case Scalar::u8: return 1;
        case Scalar::f16:
        case Scalar::bf16: return 2;
        case Scalar::i32:
        case Scalar::u32:
        case Scalar::f32: return 4;
        case Scalar::i64:
        case Scalar::u64:
        case Scalar::f64: return 8;
        case Scalar::tensor_map: return 128;
    }
    return 0;
}

std::string to_string(ParamType t) { return fmt::format("{}{}", short_name(t.scalar), t.pointer ? "*" : ""); }

namespace {

bool is_identifier(std::string_view s) {
    auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
    auto digit = [](char c) { return c >= '0' && c <= '9'; };
    return !s.empty() && alpha(s[0]) && std::all_of(s.begin(), s.end(), [&](char c) { return alpha(c) || digit(c); });
}

bool allowed(ParamType t) {
    using enum Scalar;
    static constexpr Scalar pointees[] = {f32, f16, bf16, i32, i64, u8};
    static constexpr Scalar scalars[] = {i32, i64, u32, u64, f32, f64, boolean, tensor_map};
    const auto& set = t.pointer ? std::span<const Scalar>(pointees) : std::span<const Scalar>(scalars);
    return std::find(set.begin(), set.end(), t.scalar) != set.end();
}

void validate(const KernelSpec& spec) {
    if (!is_identifier(spec.name))
        throw UsageError(fmt::format("kernel name '{}' is not a C identifier: use letters, digits and '_'", spec.name));
    std::set<std::string_view> seen;  // views into the spec: no copies
    for (const auto& c : spec.constants) {
        if (!is_identifier(c.name))
            throw UsageError(fmt::format("constant '{}' of kernel '{}' is not a C identifier", c.name, spec.name));
        if (!seen.insert(c.name).second)
            throw UsageError(fmt::format("constant '{}' is given twice for kernel '{}': give each constant once",
                                         c.name, spec.name));
    }
    seen.clear();
    if (spec.params.empty())
        throw UsageError(fmt::format("kernel '{}' has no parameters: declare its signature", spec.name));
    for (const auto& p : spec.params) {
        if (!is_identifier(p.name))
            throw UsageError(fmt::format("parameter '{}' of kernel '{}' is not a C identifier", p.name, spec.name));
        if (!seen.insert(p.name).second)
            throw UsageError(fmt::format("parameter '{}' appears twice in kernel '{}'", p.name, spec.name));
        if (!allowed(p.type))
            throw UsageError(fmt::format(
                "parameter '{}' of kernel '{}' has type {}: pointers must point to f32, f16, bf16, i32, i64 or u8, "
                "and scalars must be i32, i64, u32, u64, f32, f64, bool or tensormap",
                p.name, spec.name, to_string(p.type)));
    }
    if (spec.max_threads_per_block > 1024)
        throw UsageError(fmt::format("kernel '{}' asks for max_threads_per_block {}: CUDA allows at most 1024",
                                     spec.name, spec.max_threads_per_block));
    if (spec.min_blocks_per_multiprocessor && !spec.max_threads_per_block)
        throw UsageError(
            fmt::format("kernel '{}' sets min_blocks_per_multiprocessor without max_threads_per_block: "
                        "launch bounds need both",
                        spec.name));
}

}  // namespace

std::string value_text(const Constant& c) { return detail::constant_text(c, false); }

namespace {

/// The states of kernels built from the embedded sources, by spec: a plan builds the same kernel
/// for many layers (and each TMA op its sm80 fallback), and building one generates its entry
/// point and hashes its whole source. Held weakly: a state lives while a Kernel holds it.
class SharedStates {
public:
    std::shared_ptr<detail::KernelState> find(const std::string& id, const KernelSpec& spec) {
        std::lock_guard lock(mutex_);
        if (const auto same_id = states_.find(id); same_id != states_.end())
            for (const auto& [s, state] : same_id->second)
                if (s == spec)
                    if (auto live = state.lock()) return live;
        return nullptr;
    }
    void add(const std::string& id, const KernelSpec& spec, const std::shared_ptr<detail::KernelState>& state) {
        std::lock_guard lock(mutex_);
        auto& same_id = states_[id];
        std::erase_if(same_id, [](const auto& entry) { return entry.second.expired(); });
        same_id.emplace_back(spec, state);
    }

private:
    std::mutex mutex_;
    // By readable id (name, pointer dtypes, constants); the whole spec compared within one.
    std::unordered_map<std::string, std::vector<std::pair<KernelSpec, std::weak_ptr<detail::KernelState>>>> states_;
};

SharedStates& shared_states() {
    static SharedStates states;
    return states;
}

/// A validated spec's state: its entry point generated, its source and headers hashed.
std::shared_ptr<detail::KernelState> make_state(KernelSpec spec, std::string body_source, std::string id) {
    auto state = std::make_shared<detail::KernelState>();
    auto& s = *state;
    s.id = std::move(id);
    s.entry_point_source = detail::entry_point_text(spec);
    s.entry_point_name = spec.name + "_entry_point";
    s.kernel_source = std::move(body_source);
    s.source = s.kernel_source + "\n\n" + s.entry_point_source;
    s.headers = detail::included_headers(s.source);
    s.source_digest = detail::source_digest(s.source, *s.headers);
    s.name = std::move(spec.name);
    s.constants = std::move(spec.constants);
    s.params = std::move(spec.params);
    s.max_threads_per_block = spec.max_threads_per_block;
    s.only_for = spec.only_for;
    s.waits_in_body = spec.waits_in_body;
    return state;
}

}  // namespace

Kernel::Kernel(KernelSpec spec) {
    validate(spec);
    std::string id = detail::readable_id(spec);
    // $KJIT_KERNELS_DIR's files may change between two kernels: those are built afresh.
    if (!detail::sources_embedded()) {
        std::string body = detail::kernel_body(spec.name);
        state_ = make_state(std::move(spec), std::move(body), std::move(id));
        return;
    }
    if ((state_ = shared_states().find(id, spec))) return;
    state_ = make_state(spec, detail::kernel_body(spec.name), id);
    shared_states().add(id, spec, state_);
}

Kernel::Kernel(KernelSpec spec, std::string body_source) {
    validate(spec);
    std::string id = detail::readable_id(spec);
    state_ = make_state(std::move(spec), std::move(body_source), std::move(id));
}

const std::string& Kernel::name() const noexcept { return state_->name; }
const std::string& Kernel::id() const noexcept { return state_->id; }
const std::string& Kernel::kernel_source() const noexcept { return state_->kernel_source; }
const std::string& Kernel::entry_point_source() const noexcept { return state_->entry_point_source; }
const std::string& Kernel::source() const noexcept { return state_->source; }
std::string Kernel::source_hash() const { return state_->source_digest.hex(); }
const std::string& Kernel::entry_point_name() const noexcept { return state_->entry_point_name; }
const std::vector<Constant>& Kernel::constants() const noexcept { return state_->constants; }
const std::vector<Param>& Kernel::params() const noexcept { return state_->params; }
unsigned Kernel::max_threads_per_block() const noexcept { return state_->max_threads_per_block; }
const std::optional<Arch>& Kernel::only_for() const noexcept { return state_->only_for; }
bool Kernel::runs_on(Arch device) const noexcept {
    return !state_->only_for || state_->only_for->number() == device.number();
}
Arch Kernel::target(Arch device) const noexcept { return state_->only_for.value_or(device); }
const std::vector<SourceFile>& Kernel::headers() const noexcept { return *state_->headers; }

CacheKey Kernel::key(const CompileOptions& options) const {
    std::lock_guard lock(state_->memo_mutex);
    for (const auto& [opts, key] : state_->keys)
        if (opts == options) return key;
    const CacheKey key = detail::cache_key(state_->source_digest, options.canonical(), nvrtc_version());
    state_->keys.emplace_back(options, key);
    return key;
}

void detail::require_signature(const Kernel& kernel, const std::vector<Param>& expected) {
    const auto& actual = kernel.params();
    const bool same = actual.size() == expected.size() &&
                      std::equal(actual.begin(), actual.end(), expected.begin(),
                                 [](const Param& a, const Param& b) { return a.name == b.name && a.type == b.type; });
    if (!same) {
        auto text = [](const std::vector<Param>& ps) {
            std::vector<std::string> parts;
            for (const auto& p : ps) parts.push_back(fmt::format("{} {}", to_string(p.type), p.name));
            return fmt::format("({})", fmt::join(parts, ", "));
        };
        throw UsageError(fmt::format("kernel {} takes {}, not {}: its typed view must have the same signature",
                                     kernel.id(), text(actual), text(expected)));
    }
}

}  // namespace kjit
