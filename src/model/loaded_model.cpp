// A planned graph loaded onto a device: parameters and activations allocated once, every
// kernel compiled (in parallel) and loaded, then run op by op or replayed as one CUDA graph.
#include <algorithm>
#include <chrono>

#include <kjit/conv_tuner.hpp>

#include "jit/file_bytes.hpp"
#include "jit/mapped_memory.hpp"
#include "model/loaded_model_impl.hpp"

namespace kjit {
namespace {

/// Byte ranges of one allocation, each aligned as cuMemAlloc aligns an allocation of its own.
class Arena {
public:
    struct Range {
        std::size_t offset, bytes;
    };
    Range place(std::size_t bytes) {
        const Range r{size_, bytes};
        size_ += (bytes + alignment - 1) / alignment * alignment;
        return r;
    }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }

private:
    static constexpr std::size_t alignment = 256;
    std::size_t size_ = 0;
};

}  // namespace

/// The whole file; `what` names it in the error ("the graph file").
std::string detail::read_file(const std::filesystem::path& file, std::string_view what) {
    if (auto bytes = detail::file_bytes(file)) return *std::move(bytes);
    throw UsageError(fmt::format("cannot read {} {}", what, file.string()));
}

LoadedModel::LoadedModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LoadedModel::~LoadedModel() = default;
LoadedModel::LoadedModel(LoadedModel&&) noexcept = default;
LoadedModel& LoadedModel::operator=(LoadedModel&&) noexcept = default;

LoadedModel LoadedModel::load(std::string_view graph_json, const Device& device, int batch, Runtime& runtime,
                              PlanOptions options) {
    const auto start = std::chrono::steady_clock::now();
    ModelPlan planned = ModelPlan::from_json(graph_json, batch, DeviceTraits::of(device), options);
    const std::chrono::duration<double, std::milli> planning = std::chrono::steady_clock::now() - start;
    LoadedModel model = load(std::move(planned), device, runtime);
    model.impl_->times.plan_ms += planning.count();
    return model;
}

LoadedModel LoadedModel::load(ModelPlan planned, const Device& device, Runtime& runtime) {
    using clock = std::chrono::steady_clock;
    LoadTimes times;
    auto lap = [mark = clock::now()](double& ms) mutable {
        const auto now = clock::now();
        ms = std::chrono::duration<double, std::milli>(now - mark).count();
        mark = now;
    };
    // Each conv layer runs its tuned winner where one is stored for this device and driver — or,
    // under the autotune policy (Runtime::autotune), the winner of tuning it now — rather than
    // the heuristic's pick, which the plan holds already (and which is not built again).
    if (const auto convs = planned.conv_layers(); !convs.empty()) {
        const TuneTarget target = TuneTarget::of(device);
        std::optional<Stream> stream;  // made only to tune
        for (const auto& [node, layer] : convs) {
            if (!runtime.autotune()) {
                if (auto stored = stored_conv2d_bn_silu(layer.attrs, layer.shape, target, runtime.cache()))
                    planned.replace_op(node, std::move(stored));
                continue;
            }
            if (!stream) stream.emplace(device);
            // The stored winner, else one tuned now; the heuristic's pick is the plan's already.
            if (PickedConv pick = pick_conv2d_bn_silu(layer.attrs, layer.shape, runtime, *stream);
                pick.source != PickSource::heuristic)
                planned.replace_op(node, std::move(pick.op));
        }
    }
    // Each attention node the same: its stored `kjit tune flash_attention2` winner, else the
    // plan's pick (dispatch's). A winner with other key shares sizes its workspace slot anew.
    if (const auto attention = planned.attention_layers(); !attention.empty()) {
        const TuneTarget target = TuneTarget::of(device);
        for (const auto& [node, shape] : attention) {
            const auto& op = dynamic_cast<const AttentionForwardOp&>(*planned.nodes()[node].op);
            const AttentionPick pick = pick_attention(shape, target.device, target.device_name, target.driver,
                                                      runtime.cache(), op.layout());
            if (pick.tuned && pick.tiles != op.tiles()) planned.replace_op(node, op.with_tiles(pick.tiles));
        }
    }
    lap(times.plan_ms);
    auto impl = std::make_unique<Impl>(
        Impl{device, &runtime, std::move(planned), {}, std::nullopt, std::nullopt, {}, {}, {}, {}, std::nullopt});
    const ModelPlan& plan = impl->plan;
    const std::size_t values = plan.values().size();
    impl->input_pointers.assign(values, nullptr);

    // Every parameter in one allocation and every activation in another: YOLOv8n's ~180
    // separate allocations took 2-3 ms at batch 16 on an H100 host, two take 0.1 ms.
    Arena parameters, activations;
    std::vector<std::vector<Arena::Range>> param_at;
    std::vector<std::optional<Arena::Range>> tight_at(values), padded_at(values);
    for (const auto& node : plan.nodes()) {
        auto& slots = param_at.emplace_back();
        for (const auto& p : node.params)
            slots.push_back(parameters.place(std::max<std::size_t>(1, element_count(p.shape)) * sizeof(float)));
        const auto& [name, shape, type] = plan.values()[node.output];
        if (plan.storage()[node.output].value == node.output)  // else it lives in a concat's output
            tight_at[node.output] = activations.place(element_count(shape) * byte_size(type));
        const RuntimeOp& op = node.launched_op();
        const std::size_t row = op.forward_output_row_elems(shape), stride = op.forward_output_row_stride(shape);
        if (row == 0 || element_count(shape) % row || stride < row)
            throw UsageError(fmt::format("node '{}': rows of {} elements every {} do not tile its output [{}]",
                                         node.name, row, stride, fmt::join(shape, ", ")));
        if (stride > row)
            padded_at[node.output] = activations.place(element_count(shape) / row * stride * byte_size(type));
    }
    if (parameters.size()) impl->parameter_memory.emplace(device, parameters.size());
    if (activations.size()) impl->activation_memory.emplace(device, activations.size());
    for (const auto& slots : param_at) {
        auto& spans = impl->params.emplace_back();
        for (const Arena::Range& r : slots) spans.push_back(impl->parameter_memory->subspan(r.offset, r.bytes));
    }
    const auto activation = [&](const std::optional<Arena::Range>& r) -> std::optional<DeviceSpan> {
        if (!r) return std::nullopt;
        return impl->activation_memory->subspan(r->offset, r->bytes);
    };
    for (std::size_t v = 0; v < values; ++v) {
        impl->tight.push_back(activation(tight_at[v]));
        impl->padded.push_back(activation(padded_at[v]));
    }

    // Parameters are zero where their op gives no initial values (param_init_data).
    if (impl->parameter_memory) impl->parameter_memory->fill(0);
    for (std::size_t n = 0; n < plan.nodes().size(); ++n)
        for (std::size_t p = 0; p < param_at[n].size(); ++p)
            if (auto init = plan.nodes()[n].op->param_init_data(p)) {
                const auto& [key, shape] = plan.nodes()[n].params[p];
                if (init->size() != element_count(shape) * sizeof(float))
                    throw UsageError(fmt::format("{}: param_init_data gives {} bytes for {} floats", key, init->size(),
                                                 element_count(shape)));
                impl->params[n][p].upload(std::span<const std::byte>(*init));
            }
    lap(times.buffers_ms);
    // The plan's kernels, each fetched from the cache (its cubin alone) or compiled, and loaded as a
    // module, all in parallel.
    const RuntimeStats before = runtime.stats();
    runtime.load_all(plan.kernels(), device);
    lap(times.kernels_ms);
    const RuntimeStats after = runtime.stats();
    times.kernel_fetch_thread_ms = after.fetch_ms - before.fetch_ms;
    times.module_load_thread_ms = after.module_load_ms - before.module_load_ms;
    impl->times = times;
    return LoadedModel(std::move(impl));
}

LoadedModel LoadedModel::load_file(const std::filesystem::path& graph, const Device& device, int batch,
                                   Runtime& runtime, PlanOptions options) {
    return load(detail::read_file(graph, "the graph file"), device, batch, runtime, options);
}

std::vector<Tensor> LoadedModel::forward(std::span<void* const> inputs, const Stream& stream) {
    impl_->set_inputs(inputs);
    for (std::size_t n = 0; n < impl_->plan.nodes().size(); ++n) impl_->run_node(n, stream);
    return impl_->outputs();
}

void LoadedModel::capture(std::span<void* const> inputs, const Stream& stream) {
    impl_->graph.reset();
    impl_->graph.emplace(Graph::capture(stream, [&] { (void)forward(inputs, stream); }));
}

void LoadedModel::replay(const Stream& stream) const {
    if (!impl_->graph) throw UsageError("replay() before capture(): capture the forward first");
    impl_->graph->launch(stream);
}

std::vector<Tensor> LoadedModel::outputs() const { return impl_->outputs(); }

std::vector<float> LoadedModel::read_output(std::size_t i, const Stream& stream) const {
    const std::size_t count = element_count(impl_->output(i).shape);
    std::vector<float> host;
    host.reserve(count);
    // Its pages made present in one call before they are written: megabytes of them faulted in
    // one by one by the copy cost more than the copy (3.8 against 0.5 ms for 6.4 MB on an H100 host).
    detail::populate(std::as_writable_bytes(std::span(host.data(), count)));
    host.resize(count);
    read_output(i, stream, host);
    return host;
}

void LoadedModel::read_output(std::size_t i, const Stream& stream, std::span<float> host) const {
    const Tensor out = impl_->output(i);
    const std::size_t count = element_count(out.shape);
    if (host.size() != count)
        throw UsageError(fmt::format("output {} [{}] has {} values; the host span holds {}", i,
                                     fmt::join(out.shape, ", "), count, host.size()));
    stream.synchronize();  // the copy below runs on the legacy stream, which does not wait for it
    const Scalar type = impl_->plan.values()[impl_->plan.outputs()[i]].type;
    const DeviceSpan from(impl_->device, reinterpret_cast<std::uint64_t>(out.data), count * byte_size(type));
    download_as_f32(from, type, host);
}

std::vector<double> LoadedModel::node_times_ms(std::span<void* const> inputs, const Stream& stream, int iterations) {
    impl_->set_inputs(inputs);
    const std::size_t n = impl_->plan.nodes().size();
    std::vector<std::vector<double>> samples(n);
    std::vector<Event> marks;
    for (std::size_t i = 0; i <= n; ++i) marks.emplace_back(impl_->device);
    for (int it = 0; it < std::max(1, iterations); ++it) {
        marks[0].record(stream);
        for (std::size_t i = 0; i < n; ++i) {
            impl_->run_node(i, stream);
            marks[i + 1].record(stream);
        }
        marks[n].synchronize();
        for (std::size_t i = 0; i < n; ++i) samples[i].push_back(Event::elapsed_ms(marks[i], marks[i + 1]));
    }
    std::vector<double> medians;
    for (auto& s : samples) {
        std::nth_element(s.begin(), s.begin() + s.size() / 2, s.end());
        medians.push_back(s[s.size() / 2]);
    }
    return medians;
}

const ModelPlan& LoadedModel::plan() const noexcept { return impl_->plan; }
const LoadTimes& LoadedModel::load_times() const noexcept { return impl_->times; }

DeviceSpan LoadedModel::parameter(std::string_view key) const {
    for (std::size_t n = 0; n < impl_->plan.nodes().size(); ++n)
        for (std::size_t p = 0; p < impl_->plan.nodes()[n].params.size(); ++p)
            if (impl_->plan.nodes()[n].params[p].key == key) return impl_->params[n][p];
    throw UsageError(fmt::format("the model has no parameter '{}'", key));
}

}  // namespace kjit
