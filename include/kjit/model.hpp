// kjit/model.hpp — run a network of RuntimeOps: a JSON graph planned for a batch size, its
// parameters by dotted key ("{node}.{slot}") from a safetensors file (kjit/safetensors.hpp), and
// its forward pass run op by op or replayed as one CUDA graph. The graph format is in docs/MODEL.md.
#pragma once
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <kjit/attention.hpp>
#include <kjit/conv.hpp>
#include <kjit/device_traits.hpp>
#include <kjit/driver.hpp>
#include <kjit/runtime.hpp>
#include <kjit/runtime_op.hpp>
#include <kjit/safetensors.hpp>

namespace kjit {

// ---- ops of a graph ------------------------------------------------------------------------------------

/// A node's attributes ("attrs" in the graph), read with the node named in every error.
class NodeAttrs {
public:
    virtual ~NodeAttrs() = default;
    [[nodiscard]] virtual bool has(std::string_view key) const = 0;
    /// An integer attribute; a missing key gives `fallback`, or an error when there is none.
    [[nodiscard]] virtual int integer(std::string_view key, std::optional<int> fallback = std::nullopt) const = 0;
    /// One integer or a list of `count`: "kernel": 3 or "kernel": [3, 3].
    [[nodiscard]] virtual std::vector<int> integers(std::string_view key, std::size_t count,
                                                    std::optional<int> fallback = std::nullopt) const = 0;
    [[nodiscard]] virtual double number(std::string_view key, std::optional<double> fallback = std::nullopt) const = 0;
    /// A true/false attribute: "causal": true.
    [[nodiscard]] virtual bool flag(std::string_view key, std::optional<bool> fallback = std::nullopt) const = 0;
    /// A string attribute, one of `allowed` (an error lists them): "to": "bf16".
    [[nodiscard]] virtual std::string choice(std::string_view key, std::span<const std::string_view> allowed,
                                             std::optional<std::string_view> fallback = std::nullopt) const = 0;
};

/// A node's inputs as its op factory sees them: each one's shape and element type (Scalar::f32,
/// f16 or bf16; a graph input's "dtype", a node's output type).
struct NodeInputs {
    std::span<const ShapeView> shapes;
    std::span<const Scalar> types;
    [[nodiscard]] std::size_t size() const noexcept { return shapes.size(); }
};

/// What an op factory returns: the op, its output shape for the node's concrete inputs, and the
/// element types it reads and writes. The planner refuses a node whose inputs are not of
/// `input_types` (naming the cast to add), so an op that reads f32 only says nothing.
struct MadeOp {
    std::unique_ptr<RuntimeOp> op;
    Shape output_shape;
    Scalar output_type = Scalar::f32;
    std::vector<Scalar> input_types{};  ///< one per input; empty: f32 each
};
using OpFactory = std::function<MadeOp(const NodeAttrs& attrs, const NodeInputs& inputs, const DeviceTraits& device)>;

/// Makes `name` available as a graph op. Built in (src/model/builtin_ops.cpp): conv2d_bn_silu
/// (attrs c_out, kernel, stride, pad, groups, bn_eps; through dispatch_conv2d_bn_silu), add,
/// concat, maxpool2d (kernel, stride, pad), upsample_nearest2d (scale, default 2) — all f32 —,
/// cast (to: f32, f16 or bf16) and attention (q, k, v in f16 or bf16; causal, scale, layout;
/// through dispatch_attention). Registering a name again replaces it.
void register_op(std::string name, OpFactory factory);

// ---- a planned graph (no GPU needed) -----------------------------------------------------------------------

/// What a planner may do beyond running each node as written.
struct PlanOptions {
    /// Zero-copy concat: a concat's inputs are written straight into channel slices of its
    /// output by their producers, and the concat launches nothing (see ModelPlan::Storage).
    bool place_concat_inputs = true;
    /// Fused residual adds: an add whose one input is an op's output that only it reads, where
    /// the op accepts_residual_add(), is made by that op's epilogue (Node::residual) and launches
    /// nothing.
    bool fuse_residual_adds = true;
    /// Chained ops: a node whose one input is another's output runs in that node's launch where
    /// its op is chained_with this one (e.g. the SPPF block's max pools); it launches nothing.
    bool chain_ops = true;
};

/// A graph for one batch size: nodes in topological order, each with its op made, its output
/// shape and its parameter slots. Malformed graphs (unknown op, cycle, missing input, shape
/// mismatch, duplicate name) throw UsageError naming the node.
class ModelPlan {
public:
    /// A tensor of the graph: a graph input or a node's output.
    struct Value {
        std::string name;
        Shape shape;
        Scalar type = Scalar::f32;  ///< f32, f16 or bf16
    };
    struct Param {
        std::string key;  ///< "{node}.{slot}"
        Shape shape;
    };
    /// A concat input the planner could not place in the concat's output: copied there, and why.
    struct ConcatCopy {
        std::size_t input;  ///< index into the node's inputs
        std::string reason;
    };
    struct Node {
        std::string name;
        std::string op_name;
        std::vector<std::size_t> inputs;  ///< indices into values()
        std::size_t output;               ///< index into values()
        std::unique_ptr<RuntimeOp> op;
        std::vector<Param> params;
        std::vector<ConcatCopy> copies;  ///< a concat's (RuntimeOp::is_channel_concat) copied inputs
        /// The value this node's op adds in its epilogue: an add fused into it, which then writes
        /// the add's output (its own output value is never made).
        std::optional<std::size_t> residual{};
        /// The values this node's launch also writes: the outputs of the nodes chained into it,
        /// in chain order, which `chain` runs.
        std::vector<std::size_t> chained{};
        /// The op that runs `op` and the chained nodes' ops in one launch (RuntimeOp::chained_with).
        std::unique_ptr<RuntimeOp> chain{};
        /// The node whose launch makes this one's output (an add in its epilogue, an op chained
        /// into it): this one launches nothing.
        std::optional<std::size_t> made_by{};

        [[nodiscard]] bool fused() const noexcept { return made_by.has_value(); }
        /// The op its launches run: `chain` where nodes are chained into it, else `op`.
        [[nodiscard]] const RuntimeOp& launched_op() const noexcept { return chain ? *chain : *op; }
    };
    /// Where a value's tensor lives: in its own buffer, or as channels [channel, channel + C) of
    /// another value's — a concat's output the planner placed it in, which its producer writes
    /// and its readers read in place (at batch > 1 at that tensor's image stride).
    struct Storage {
        std::size_t value;        ///< the value whose buffer holds it (itself where it has its own)
        std::size_t channel = 0;  ///< its first channel there
    };

    [[nodiscard]] static ModelPlan from_json(std::string_view graph_json, int batch, const DeviceTraits& device,
                                             PlanOptions options = {});

    /// A conv node's layer, as tuning keys it.
    struct ConvLayer {
        Conv2dAttrs attrs;
        Conv2dShape shape;
    };
    /// The conv layers of the plan's conv2d_bn_silu nodes (Conv2dOp), one per node, in node order.
    [[nodiscard]] std::vector<std::pair<std::size_t, ConvLayer>> conv_layers() const;
    /// The problems of the plan's attention nodes (AttentionForwardOp), one per node, in node order.
    [[nodiscard]] std::vector<std::pair<std::size_t, AttentionShape>> attention_layers() const;
    /// Replaces node `node`'s op (a conv's or an attention's: another configuration of the same
    /// layer, as a tuned winner names it). Its shapes and weights stay, so the new op must take
    /// the same; the slots an op writes itself (RuntimeOp::param_is_weight) take the new op's shapes.
    void replace_op(std::size_t node, std::unique_ptr<RuntimeOp> op);

    [[nodiscard]] int batch() const noexcept { return batch_; }
    [[nodiscard]] const std::vector<Value>& values() const noexcept { return values_; }
    [[nodiscard]] const std::vector<Node>& nodes() const noexcept { return nodes_; }
    [[nodiscard]] const std::vector<std::size_t>& inputs() const noexcept { return inputs_; }
    [[nodiscard]] const std::vector<std::size_t>& outputs() const noexcept { return outputs_; }
    /// Per value, where it lives.
    [[nodiscard]] const std::vector<Storage>& storage() const noexcept { return storage_; }
    /// Kernel launches and copies one forward runs: every node's launches, a concat's copies
    /// only, none for a fused add or a chained node.
    [[nodiscard]] std::size_t launches() const;
    /// The kernels one forward launches, each once, in node order: the launched ops' (a concat
    /// copies and a fused or chained node is launched by another, so theirs are not listed).
    [[nodiscard]] std::vector<const Kernel*> kernels() const;

private:
    /// Who makes and who reads each value (plan.cpp).
    struct Dataflow;
    /// Where every value lives and which node launches what: place_concat_inputs, then
    /// fuse_residual_adds, then chain_ops.
    void plan_storage();
    /// Places the concats' inputs in their outputs where producers and readers allow (storage_,
    /// Node::copies).
    void place_concat_inputs(const Dataflow& flow);
    /// Folds adds into their producers' epilogues where allowed (Node::residual, Node::fused).
    void fuse_residual_adds(const Dataflow& flow);
    /// Runs chains of nodes in their first node's launch where the ops allow (Node::chain,
    /// Node::chained, Node::made_by).
    void chain_ops(const Dataflow& flow);

    int batch_ = 0;
    PlanOptions options_;
    std::vector<Storage> storage_;
    std::vector<Value> values_;
    std::vector<Node> nodes_;
    std::vector<std::size_t> inputs_, outputs_;
};

// ---- a loaded graph ------------------------------------------------------------------------------------------

/// What load_weights did.
struct WeightsReport {
    std::size_t loaded = 0;          ///< parameter slots filled (from the file or folded)
    std::size_t folded = 0;          ///< nodes whose slots were folded from other tensors (RuntimeOp::param_fold)
    std::vector<std::string> extra;  ///< keys in the file no slot took (load_weights warns)
};

/// Whether the tensors of a safetensors file fit `plan`, without a device: every weight slot
/// (RuntimeOp::param_is_weight) present (or folded, as LoadedModel::load_weights folds it) as
/// F32 of its shape. Throws
/// UsageError listing every missing key, mismatch and fold that fails (a BatchNorm variance
/// below -eps); keys no slot takes are returned in `extra` (load_weights warns about them).
WeightsReport check_weights(const ModelPlan& plan, const std::map<std::string, SafeTensor>& tensors);

/// Where LoadedModel::load spent its time, wall milliseconds.
struct LoadTimes {
    double plan_ms = 0;     ///< the graph planned (unless given planned), tuned winners looked up
    double buffers_ms = 0;  ///< parameters and activations allocated and initialised
    double kernels_ms = 0;  ///< every kernel's cubin read from the cache (or compiled) and loaded, in parallel
    /// Within kernels_ms, summed over the threads (RuntimeStats): reading the cubins (or compiling
    /// them), and the driver loading them.
    double kernel_fetch_thread_ms = 0, module_load_thread_ms = 0;
};

class LoadedModel {
public:
    /// Plans the graph for `batch`, allocates every parameter ("{node}.{slot}", from
    /// param_init_data or zero) and every activation once — a concat's inputs inside its output
    /// where `options` and the ops allow (ModelPlan::Storage) — and compiles or fetches the
    /// kernels the plan launches, loading them on `device` (both in parallel).
    [[nodiscard]] static LoadedModel load(std::string_view graph_json, const Device& device, int batch,
                                          Runtime& runtime = Runtime::global(), PlanOptions options = {});
    [[nodiscard]] static LoadedModel load_file(const std::filesystem::path& graph, const Device& device, int batch,
                                               Runtime& runtime = Runtime::global(), PlanOptions options = {});
    /// The same for a graph planned already — for `device`'s traits (DeviceTraits::of) — so a
    /// caller that planned it to check the weights first does not plan it twice.
    [[nodiscard]] static LoadedModel load(ModelPlan planned, const Device& device,
                                          Runtime& runtime = Runtime::global());
    ~LoadedModel();
    LoadedModel(LoadedModel&&) noexcept;
    LoadedModel& operator=(LoadedModel&&) noexcept;

    /// Fills the weight slots by dotted key (an attention's lse, which it writes, is none). Where a node's op folds some slots from other tensors
    /// (RuntimeOp::param_fold: a conv's bn_scale and bn_shift from "{node}.bn.weight", ".bn.bias",
    /// ".bn.running_mean", ".bn.running_var") and the file holds those instead, they are folded.
    /// Missing keys and dtype or shape mismatches throw UsageError listing all of them; extra
    /// keys are warned about.
    WeightsReport load_weights(const std::filesystem::path& safetensors);
    WeightsReport load_weights(const std::map<std::string, SafeTensor>& tensors);

    /// Runs every node on `stream`. `inputs`: device pointers to the graph inputs, in order,
    /// tight tensors of plan().values()[plan().inputs()[i]]'s shape and type (f32 unless the
    /// graph gives a "dtype"), 16-byte aligned where an attention node reads them. An op whose
    /// output rows are padded (forward_output_row_stride > row elems) writes a padded buffer
    /// that is copied back to tight rows (one 2-D async copy) before anyone reads it; a concat
    /// copies only the inputs the plan could not place in its output (ModelPlan::Node::copies),
    /// one 2-D async copy each. Returns the outputs (device memory owned by the model, tight, of
    /// their values' types, valid until the next forward or replay). Does not synchronise.
    std::vector<Tensor> forward(std::span<void* const> inputs, const Stream& stream);

    /// Records forward(inputs) into one CUDA graph; replay() reruns it (new data goes into the
    /// same input buffers). Replaces an earlier capture.
    void capture(std::span<void* const> inputs, const Stream& stream);
    void replay(const Stream& stream) const;
    [[nodiscard]] std::vector<Tensor> outputs() const;
    /// Output `i` copied to the host as floats, f16 and bf16 values widened (waits for `stream`).
    [[nodiscard]] std::vector<float> read_output(std::size_t i, const Stream& stream) const;
    /// The same into `host`, which holds exactly the output's values: a caller reading every
    /// forward's outputs reuses its buffer (a new one's pages are faulted in as the copy writes
    /// them, which for megabytes costs more than the copy).
    void read_output(std::size_t i, const Stream& stream, std::span<float> host) const;

    /// Median milliseconds of each node over `iterations` forwards (events around each node).
    [[nodiscard]] std::vector<double> node_times_ms(std::span<void* const> inputs, const Stream& stream,
                                                    int iterations);

    [[nodiscard]] const ModelPlan& plan() const noexcept;
    [[nodiscard]] const LoadTimes& load_times() const noexcept;
    /// A parameter's device memory by dotted key (all parameters share one allocation, the
    /// model's); throws UsageError for an unknown key.
    [[nodiscard]] DeviceSpan parameter(std::string_view key) const;

private:
    struct Impl;
    explicit LoadedModel(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace kjit
