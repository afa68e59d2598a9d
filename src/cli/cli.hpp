// The kjit command line: one file per subcommand; this header holds what they share.
#pragma once
#include <array>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <kjit/conv_tuner.hpp>
#include <kjit/kjit.hpp>
#include <kjit/op_timing.hpp>
#include <nlohmann/json.hpp>

namespace kjit::cli {

/// Exit codes: 0 ok, 1 a failure (a kernel failed, a fault was found), 2 a usage or environment
/// error (bad arguments, no GPU where one is needed).
enum Exit : int { ok = 0, failure = 1, usage = 2 };

/// Options every subcommand takes.
struct Common {
    std::string cache_dir;         ///< --cache-dir, else $KJIT_CACHE_DIR and the default rule
    bool cache_dir_given = false;  ///< --cache-dir was on the command line (an empty one is an error)
    bool verbose = false;          ///< -v: log hits, misses and compile times
    bool json = false;             ///< --json where the subcommand prints tables
};

void add_common_options(CLI::App& sub, Common& common, bool json);

/// Checks for integer options that must fit an int: "Value -3 not in range [1 - 2147483647]".
inline const CLI::Range positive_int{1, std::numeric_limits<int>::max(), "POSITIVE"};
inline const CLI::Range non_negative_int{0, std::numeric_limits<int>::max(), "NON-NEGATIVE"};
/// The cache directory the options and environment select.
[[nodiscard]] std::filesystem::path cache_directory(const Common& common);
/// The runtime over that directory, made once per process.
[[nodiscard]] Runtime& runtime(const Common& common);
/// The whole file named by an option; UsageError "OPTION FILE: cannot read the file" otherwise.
[[nodiscard]] std::string read_option_file(const std::string& file, std::string_view option);
/// The median of `values` (reordered).
[[nodiscard]] double median(std::vector<double> values);

/// Device 0, or a NoDeviceError saying `kjit <command>` needs a GPU and why there is none.
[[nodiscard]] Device gpu_or_explain(const char* command);
/// The local GPU's arch, or a UsageError telling the user to pass --arch.
[[nodiscard]] Arch local_arch_or_explain(std::string_view what);
/// The device a plan is for, and in words: the local GPU unless `arch` names another; else the
/// part that arch is best known by (sm_90: an H100/H200), unless `multiprocessors` and
/// `max_shared_bytes` (0: the part's) say otherwise.
[[nodiscard]] std::pair<DeviceTraits, std::string> planning_device(std::string_view arch, int multiprocessors,
                                                                   int max_shared_bytes);
/// The device to check input against before asking for a GPU: the local one, else an sm_90
/// part (what makes a layer or a graph invalid does not depend on which).
[[nodiscard]] DeviceTraits checking_device();

/// One conv layer to run or tune.
struct Layer {
    Conv2dAttrs attrs;
    Conv2dShape shape;
};

/// A layer's numbers as the command line or a shapes file gives them.
struct LayerSpec {
    int batch = 1, cin = 0, cout = 0, height = 0, width = 0;
    int kernel_h = 1, kernel_w = 1, stride = 1, pad = 0, groups = 1;
};
/// The layer, validated: UsageError says which number is wrong and why.
[[nodiscard]] Layer make_layer(const LayerSpec& spec);

/// A layer's numbers as options: --batch --cin --cout --hw H W [--kernel-size KH KW] [--stride S]
/// [--pad P] [--groups G].
struct LayerOptions {
    int batch = 1, cin = 0, cout = 0, stride = 1, pad = 0, groups = 1;
    std::vector<int> hw, kernel_size{1, 1};
    /// Whether any of the layer's sizes was given (then all of them must be).
    [[nodiscard]] bool given() const noexcept { return !hw.empty() || cin || cout; }
    /// Whether a window other than the 1x1, stride-1, unpadded default was given.
    [[nodiscard]] bool window_given() const noexcept {
        return kernel_size != std::vector<int>{1, 1} || stride != 1 || pad != 0;
    }
};
void add_layer_options(CLI::App& sub, LayerOptions& o);
/// The layer the options give, validated; UsageError naming what is missing or wrong.
[[nodiscard]] Layer layer_of(const LayerOptions& o);

/// What the check compares against: every output, so nothing is sampled.
inline constexpr const char* reference_kind = "the float64 CPU reference, every output, on all cores";
/// A layer whose tensors and float64 reference do not fit this machine's memory: a UsageError
/// before anything is allocated.
void check_fits_host(const Layer& layer);

/// Layers from the text of a shapes file (untrusted bytes, fuzzed: tests/fuzz):
/// {"layers": [{"batch": 1, "cin": 64, "cout": 64, "hw": [56, 56], "kernel_size": [3, 3],
/// "stride": 1, "pad": 1, "groups": 1}, …]}; kernel_size, stride, pad and groups are optional.
/// `source` names the file in errors.
[[nodiscard]] std::vector<Layer> parse_layers(std::string_view text, const std::string& source);

/// One shipped kernel configuration to compile for one arch.
struct CompileJob {
    const Kernel* kernel;
    Arch arch;
};
struct CompileJobs {
    std::vector<Kernel> kernels;  ///< the jobs point into it
    std::vector<CompileJob> jobs;
    std::size_t other_arch = 0;  ///< arch-specific configurations left out: not built for an arch asked
};
/// Every configuration of the shipped kernel families named (all where none is) for each arch it
/// runs on; UsageError for an unknown family, listing the shipped ones.
[[nodiscard]] CompileJobs compile_jobs(std::span<const std::string> families, std::span<const Arch> archs);
/// What one job gave: its compiled entry, or why it failed.
struct CompileOutcome {
    const CompileJob* job;
    std::optional<CompileResult> result;
    std::string error;
};
/// Compiles (or finds) `jobs` on up to `threads` threads, calling `done` for each as it finishes
/// (one call at a time). Kernels another live process is compiling are left to the end, then
/// waited for, saying so on stderr. Returns the threads used.
std::size_t compile_in_parallel(Runtime& rt, std::span<const CompileJob> jobs, unsigned threads,
                                const std::function<void(const CompileOutcome&)>& done);

/// A layer `kjit check` runs when none is given, and the edge it is there for.
struct CheckLayer {
    Layer layer;
    const char* why;
};
/// kjit check's built-in conv layers: 1×1 with M = 1 and with pixels, channels and K off every
/// tile (prime batch), TMA-eligible 1×1 and 3×3, strided, 5×5 and 7×7 filters, a deep K for
/// split-K, depthwise 3×3 and 7×7 with odd channels and images and a channel multiplier, narrow
/// and 32-channel groups.
[[nodiscard]] std::span<const CheckLayer> conv_check_layers();

/// One run of an elementwise op: its inputs' shapes, and its float64 reference.
struct ElementwiseCase {
    std::string name;
    std::shared_ptr<const RuntimeOp> op;
    std::vector<Shape> inputs;
    std::function<std::vector<double>(std::span<const std::vector<float>>)> reference;  ///< of the values as stored
    double tolerance;
    Scalar input_type = Scalar::f32, output_type = Scalar::f32;  ///< what the op reads and writes
};
/// The elementwise op families kjit check runs, by kernel family name.
[[nodiscard]] bool is_elementwise_family(std::string_view family);
/// kjit check's cases of an elementwise family: its built-in shapes (one element, sizes off the
/// block, several blocks' worth; a cast each pair of types), or the one input shape `given`
/// names (NCHW: --batch --cin --hw; maxpool2d's window from --kernel-size, --stride and --pad;
/// concat_channels' two inputs of --cin and --cout channels).
[[nodiscard]] std::vector<ElementwiseCase> elementwise_check_cases(std::string_view family, const LayerOptions& given);

/// The attention op's name on the command line (run, tune, check).
inline constexpr std::string_view attention_op = "flash_attention2";

/// `kjit run` / `kjit tune flash_attention2`'s problem: --batch comes with the layer options.
struct AttentionOptions {
    int heads = 0, kv_heads = 0, seq = 0, kv_seq = -1, head_dim = 128;
    std::string dtype = "bf16", layout = "bhsd";
    bool causal = false;
    /// Whether any of the attention problem's options was given.
    [[nodiscard]] bool given() const noexcept {
        return heads || kv_heads || seq || kv_seq >= 0 || head_dim != 128 || dtype != "bf16" || layout != "bhsd" ||
               causal;
    }
};
void add_attention_options(CLI::App& sub, AttentionOptions& o);
/// One problem on the GPU: checked against the float64 reference, timed per graph replay and
/// back to back; --config "BLOCK_M=… BLOCK_N=…" or the tuned winner or dispatch's tiles.
int run_attention(const Common& common, int batch, const AttentionOptions& o, const std::string& config, int iters);
/// Every tile configuration timed and checked; the fastest correct one stored as the tuned winner.
int tune_attention(const Common& common, int batch, const AttentionOptions& o, int iters);
/// kjit check flash_attention2: every tile configuration the device runs that holds every word of
/// `config` — of both mainloops, or of `family`'s alone where it names one
/// (flash_attention2_forward, flash_attention2_forward_sm90) — on the problem the options give or
/// on the built-in edge cases, into NaN-poisoned outputs against the float64 reference, timed; 1
/// on any failure.
int check_attention(const Common& common, int batch, const AttentionOptions& o, const std::vector<std::string>& config,
                    std::string_view family, bool failed_only, int iters);
/// Whether a configuration's text holds every one of `words` ("TMA=1", "BLOCK_M=64" …: --config).
[[nodiscard]] bool config_holds(const std::string& config, const std::vector<std::string>& words);

void add_warm(CLI::App& app, int& exit_code);
void add_check(CLI::App& app, int& exit_code);
void add_ptx(CLI::App& app, int& exit_code);
void add_run_and_tune(CLI::App& app, int& exit_code);
void add_cache(CLI::App& app, int& exit_code);
void add_model(CLI::App& app, int& exit_code);
void add_keygen(CLI::App& app, int& exit_code);

}  // namespace kjit::cli
