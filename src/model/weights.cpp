// Weights by dotted key from safetensors, with the folds ops ask for (RuntimeOp::param_fold):
// everything is checked before anything is uploaded, so a bad file changes nothing, and the
// check needs no device (kjit model plan --weights).
#include <algorithm>
#include <cstring>
#include <functional>
#include <set>

#include <kjit/safetensors.hpp>

#include "jit/log.hpp"
#include "jit/mapped_memory.hpp"
#include "jit/parallel.hpp"
#include "model/loaded_model_impl.hpp"

namespace kjit {

namespace {

/// A parameter slot's values, checked: the file's bytes, or the values a fold made.
struct SlotValues {
    std::size_t node, slot;
    std::span<const std::byte> file;
    std::vector<float> folded;

    [[nodiscard]] std::span<const std::byte> bytes() const {
        return file.empty() ? std::as_bytes(std::span(folded)) : file;
    }
};

struct ResolvedWeights {
    WeightsReport report;
    std::vector<SlotValues> slots;
};

/// What resolve_weights makes: the report alone (a check), or the slots' values as well.
enum class Resolve { check, values };

/// Every slot of `plan` from `tensors` by dotted key, or folded from other tensors where the op
/// folds them (RuntimeOp::param_fold) and the file holds those instead. Missing keys, dtype or
/// shape mismatches and sources no fold takes throw one UsageError listing all of them. Copies
/// no weights; a check folds too (the sources are small). Needs no device.
ResolvedWeights resolve_weights(const ModelPlan& plan, const std::map<std::string, SafeTensor>& tensors, Resolve what) {
    ResolvedWeights resolved;
    WeightsReport& report = resolved.report;
    std::set<std::string> used;
    std::vector<std::string> missing, mismatched, unfoldable;
    // The tensor's bytes, checked against the slot's shape.
    auto bytes_of = [&](const std::string& key, const Shape& shape) -> std::optional<std::span<const std::byte>> {
        const SafeTensor& t = tensors.at(key);
        if (t.dtype != "F32" || t.shape != shape) {
            mismatched.push_back(fmt::format("{}: the file has {} [{}], the model needs F32 [{}]", key, t.dtype,
                                             fmt::join(t.shape, ", "), fmt::join(shape, ", ")));
            return std::nullopt;
        }
        used.insert(key);
        return t.data;
    };
    for (std::size_t n = 0; n < plan.nodes().size(); ++n) {
        const auto& node = plan.nodes()[n];
        std::vector<Shape> shapes;
        for (const auto& p : node.params) shapes.push_back(p.shape);
        // Folded when the file holds the fold's sources and lacks one of its targets.
        const auto fold = node.op->param_fold(shapes);
        std::vector<std::string> sources;
        if (fold)
            for (const auto& s : fold->sources) sources.push_back(fmt::format("{}.{}", node.name, s));
        const bool folding =
            fold && std::ranges::all_of(sources, [&](const std::string& k) { return tensors.contains(k); }) &&
            std::ranges::any_of(fold->targets, [&](std::size_t t) { return !tensors.contains(node.params.at(t).key); });
        for (std::size_t p = 0; p < node.params.size(); ++p) {
            if (folding && std::ranges::find(fold->targets, p) != fold->targets.end()) continue;
            if (!node.op->param_is_weight(p)) continue;  // the op writes it
            const auto& [key, shape] = node.params[p];
            if (!tensors.contains(key)) missing.push_back(key);
            else if (auto bytes = bytes_of(key, shape)) resolved.slots.push_back({n, p, *bytes, {}});
        }
        if (!folding) continue;
        std::vector<std::vector<float>> values;
        // A fold's sources (a BatchNorm's four vectors: small) are folded in a check too, so what
        // they hold that no fold takes (a negative variance) is found without a device.
        for (const auto& k : sources)
            if (auto bytes = bytes_of(k, fold->source_shape)) {
                auto& v = values.emplace_back(bytes->size() / sizeof(float));
                std::memcpy(v.data(), bytes->data(), bytes->size());
            }
        if (values.size() != sources.size()) continue;  // mismatched: reported below
        std::vector<std::vector<float>> folded;
        try {
            folded = fold->fold(values);
        } catch (const UsageError& e) {
            unfoldable.push_back(fmt::format("node '{}' ({}): {}", node.name, fmt::join(sources, ", "), e.what()));
            continue;
        }
        ++report.folded;
        if (what == Resolve::check) {  // its slots count as filled
            report.loaded += fold->targets.size();
            continue;
        }
        if (folded.size() != fold->targets.size())
            throw UsageError(fmt::format("node '{}': its op folded {} slots for {} targets", node.name, folded.size(),
                                         fold->targets.size()));
        for (std::size_t i = 0; i < folded.size(); ++i) {
            const std::size_t slot = fold->targets[i];
            if (folded[i].size() != element_count(node.params[slot].shape))
                throw UsageError(fmt::format("node '{}': the fold gave {} values for {}", node.name, folded[i].size(),
                                             node.params[slot].key));
            resolved.slots.push_back({n, slot, {}, std::move(folded[i])});
        }
    }
    std::vector<std::string> problems;
    if (!missing.empty()) problems.push_back(fmt::format("missing: {}", fmt::join(missing, ", ")));
    if (!mismatched.empty()) problems.push_back(fmt::format("mismatched: {}", fmt::join(mismatched, "; ")));
    if (!unfoldable.empty()) problems.push_back(fmt::format("not foldable: {}", fmt::join(unfoldable, "; ")));
    if (!problems.empty())
        throw UsageError(
            fmt::format("the weights do not fit the model ({}); nothing was loaded", fmt::join(problems, "; ")));
    report.loaded += resolved.slots.size();
    for (const auto& [key, t] : tensors)
        if (!used.contains(key)) report.extra.push_back(key);
    return resolved;
}

}  // namespace

WeightsReport check_weights(const ModelPlan& plan, const std::map<std::string, SafeTensor>& tensors) {
    return resolve_weights(plan, tensors, Resolve::check).report;
}

WeightsReport LoadedModel::load_weights(const std::filesystem::path& safetensors) {
    return load_weights(SafetensorsFile(safetensors).tensors());
}

WeightsReport LoadedModel::load_weights(const std::map<std::string, SafeTensor>& tensors) {
    auto [report, slots] = resolve_weights(impl_->plan, tensors, Resolve::values);
    // Every slot laid out on the host as on the device, prepared for its kernel there, and sent
    // in one copy: 123 copies of YOLOv8n's slots cost 1.5 ms on an H100 host, one 0.5 ms. The
    // host pages are populated in one call (faulting them one by one cost 2.9 ms).
    if (!slots.empty()) {
        const DeviceSpan all = *impl_->parameter_memory;
        const detail::MappedMemory image = detail::MappedMemory::zeroed(all.size_bytes());
        // On a few threads, largest slots first (YOLOv8n's largest is a fifth of its 5.8 MB).
        std::ranges::sort(slots, std::greater{}, [](const SlotValues& s) { return s.bytes().size(); });
        detail::parallel_for(
            slots.size(),
            [&](std::size_t i) {
                const SlotValues& s = slots[i];
                const std::span<const std::byte> from = s.bytes();
                std::byte* to = image.bytes().data() + (impl_->params[s.node][s.slot].address() - all.address());
                std::memcpy(to, from.data(), from.size());
                impl_->plan.nodes()[s.node].op->prepare_param(
                    s.slot, std::span(reinterpret_cast<float*>(to), from.size() / sizeof(float)));
            },
            8);
        all.upload(image.bytes());  // resolve_weights fills every slot or throws: all of it is written
    }
    if (!report.extra.empty())
        detail::warn(fmt::format("{} tensors in the weights file belong to no parameter and were ignored: {}",
                                 report.extra.size(), fmt::join(report.extra, ", ")));
    return report;
}

}  // namespace kjit
