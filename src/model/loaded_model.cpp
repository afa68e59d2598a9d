// A planned graph loaded onto a device: parameters and activations allocated once, every
// kernel compiled (in parallel) and loaded, then run op by op or replayed as one CUDA graph.
#include <algorithm>
#include <chrono>

#include <kjit/conv_tuner.hpp>

#include "jit/file_bytes.hpp"
#include "model/loaded_model_impl.hpp"

namespace kjit {

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
    lap(times.plan_ms);
    auto impl = std::make_unique<Impl>(Impl{device, &runtime, std::move(planned), {}, {}, {}, {}, {}, std::nullopt});
    const ModelPlan& plan = impl->plan;
    const std::size_t values = plan.values().size();
    impl->tight.resize(values);
    impl->padded.resize(values);
    impl->input_pointers.assign(values, nullptr);

    // Parameters without initial values are zeroed on one stream, waited for once at the end.
    const Stream setup(device);
    for (const auto& node : plan.nodes()) {
        auto& slots = impl->params.emplace_back();
        for (std::size_t p = 0; p < node.params.size(); ++p) {
            auto& buffer = slots.emplace_back(
                device, std::max<std::size_t>(1, element_count(node.params[p].shape)) * sizeof(float));
            if (auto init = node.op->param_init_data(p)) {
                if (init->size() != element_count(node.params[p].shape) * sizeof(float))
                    throw UsageError(fmt::format("{}: param_init_data gives {} bytes for {} floats", node.params[p].key,
                                                 init->size(), element_count(node.params[p].shape)));
                buffer.upload(std::span<const std::byte>(*init));
            } else {
                buffer.fill_async(setup, 0);
            }
        }
        const Shape& shape = plan.values()[node.output].shape;
        if (plan.storage()[node.output].value == node.output)  // else it lives in a concat's output
            impl->tight[node.output].emplace(device, element_count(shape) * sizeof(float));
        const RuntimeOp& op = node.launched_op();
        const std::size_t row = op.forward_output_row_elems(shape), stride = op.forward_output_row_stride(shape);
        if (row == 0 || element_count(shape) % row || stride < row)
            throw UsageError(fmt::format("node '{}': rows of {} elements every {} do not tile its output [{}]",
                                         node.name, row, stride, fmt::join(shape, ", ")));
        if (stride > row)
            impl->padded[node.output].emplace(device, element_count(shape) / row * stride * sizeof(float));
    }
    setup.synchronize();
    lap(times.buffers_ms);
    // The plan's kernels, each fetched from the cache (its cubin alone) or compiled, and loaded as a
    // module, all in parallel.
    runtime.load_all(plan.kernels(), device);
    lap(times.kernels_ms);
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
    const auto all = impl_->outputs();
    if (i >= all.size()) throw UsageError(fmt::format("output {} of {}", i, all.size()));
    const std::size_t bytes = element_count(all[i].shape) * sizeof(float);
    DeviceBuffer staging(impl_->device, bytes);
    copy_2d_async(stream, staging.address(), bytes, reinterpret_cast<std::uint64_t>(all[i].data), bytes, bytes, 1);
    stream.synchronize();
    std::vector<float> host(bytes / sizeof(float));
    staging.download(std::span<float>(host));
    return host;
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

DeviceBuffer& LoadedModel::parameter(std::string_view key) {
    for (std::size_t n = 0; n < impl_->plan.nodes().size(); ++n)
        for (std::size_t p = 0; p < impl_->plan.nodes()[n].params.size(); ++p)
            if (impl_->plan.nodes()[n].params[p].key == key) return impl_->params[n][p];
    throw UsageError(fmt::format("the model has no parameter '{}'", key));
}

}  // namespace kjit
