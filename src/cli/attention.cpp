// kjit run / tune / check flash_attention2: one attention problem on the GPU — checked against
// the float64 reference and timed (run), or every tile configuration timed and checked and the
// winner stored (tune), or every configuration checked on edge problems (check).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>

#include <kjit/attention.hpp>
#include <kjit/op_timing.hpp>
#include <kjit/tuning.hpp>

#include "cli.hpp"

namespace kjit::cli {

void add_attention_options(CLI::App& sub, AttentionOptions& o) {
    sub.add_option("--heads", o.heads, "flash_attention2: query heads")->check(positive_int);
    sub.add_option("--kv-heads", o.kv_heads, "flash_attention2: key/value heads, dividing --heads (default: --heads)")
        ->check(positive_int);
    sub.add_option("--seq", o.seq, "flash_attention2: query length")->check(positive_int);
    sub.add_option("--kv-seq", o.kv_seq, "flash_attention2: key/value length (default: --seq)")
        ->check(non_negative_int);
    sub.add_option("--head-dim", o.head_dim, "flash_attention2: 64, 96 or 128 (default 128)")->check(positive_int);
    sub.add_option("--dtype", o.dtype, "flash_attention2: bf16 or f16 (default bf16)")
        ->check(CLI::IsMember({"bf16", "f16"}));
    sub.add_flag("--causal", o.causal, "flash_attention2: query i sees keys j <= i (torch's is_causal)");
    sub.add_option("--layout", o.layout, "flash_attention2: bhsd ([B, H, S, D], the default) or bshd ([B, S, H, D])")
        ->check(CLI::IsMember({"bhsd", "bshd"}));
}

namespace {

AttentionShape shape_of(int batch, const AttentionOptions& o) {
    if (!o.heads || !o.seq)
        throw UsageError(
            "give the problem: flash_attention2 --batch B --heads H --seq S [--kv-heads HK] [--kv-seq SK] "
            "[--head-dim D] [--dtype bf16|f16] [--causal]");
    AttentionShape s{.batch = batch,
                     .heads = o.heads,
                     .kv_heads = o.kv_heads ? o.kv_heads : o.heads,
                     .seq = o.seq,
                     .kv_seq = o.kv_seq >= 0 ? o.kv_seq : o.seq,
                     .head_dim = o.head_dim,
                     .causal = o.causal,
                     .dtype = o.dtype == "f16" ? Scalar::f16 : Scalar::bf16};
    s.validate();
    // q, k, v and o on the host as floats and 16-bit values, with room to spare.
    const double bytes = 6.0 * s.head_dim * s.batch * (2.0 * s.heads * s.seq + 2.0 * s.kv_heads * s.kv_seq);
    if (bytes > 32e9)
        throw UsageError(
            fmt::format("{}: its tensors take {:.0f} GB on the host for the reference check: use a "
                        "smaller batch",
                        s.key(), bytes / 1e9));
    return s;
}

AttentionLayout layout_of(const AttentionOptions& o) {
    return o.layout == "bshd" ? AttentionLayout::bshd : AttentionLayout::bhsd;
}

/// A problem's tensors on the device (fresh random values, uniform in [−2, 2), rounded to the
/// dtype), their host copies, and the rows the check compares: every one where the float64
/// reference is quick, else four heads' worth of rows spread over the sequence (first and last
/// included).
struct AttentionTensors {
    AttentionShape shape;
    AttentionLayout layout;
    std::vector<float> q, k, v;  // [B, H, S, D]
    DeviceBuffer dq, dk, dv, o, lse;
    std::optional<DeviceBuffer> partials;  // split-KV's workspace
    Shape q_shape, kv_shape;
    std::vector<std::size_t> rows;          // checked, as (b·H + h)·S + i; empty: all
    std::optional<AttentionReference> ref;  // computed once, for every configuration checked

    AttentionTensors(const Device& device, const AttentionShape& s, AttentionLayout l)
        : shape(s),
          layout(l),
          q(random(std::size_t(s.batch) * s.heads * s.seq * s.head_dim, s.dtype)),
          k(random(std::size_t(s.batch) * s.kv_heads * s.kv_seq * s.head_dim, s.dtype)),
          v(random(k.size(), s.dtype)),
          dq(upload(device, to_attention_layout(q, s.heads, s.seq, s.head_dim, l, s.dtype))),
          dk(upload(device, to_attention_layout(k, s.kv_heads, s.kv_seq, s.head_dim, l, s.dtype))),
          dv(upload(device, to_attention_layout(v, s.kv_heads, s.kv_seq, s.head_dim, l, s.dtype))),
          o(device, q.size() * 2),
          lse(device, std::size_t(s.batch) * s.heads * s.seq * 4),
          q_shape(dims(s.heads, s.seq)),
          kv_shape(dims(s.kv_heads, s.kv_seq)) {
        if (s.flops() < 4e9) return;
        const int heads = s.batch * s.heads;
        for (int n = 0; n < std::min(heads, 4); ++n) {
            const std::size_t bh = std::size_t(heads - 1) * n / std::max(1, std::min(heads, 4) - 1);
            for (int r = 0; r < 32; ++r) rows.push_back(bh * s.seq + std::size_t(s.seq - 1) * r / 31);
        }
        std::ranges::sort(rows);
        rows.erase(std::ranges::unique(rows).begin(), rows.end());
    }

    const AttentionReference& reference() {
        if (!ref) ref = attention_reference(shape, q, k, v, 0, rows);
        return *ref;
    }

    [[nodiscard]] Shape dims(int heads, int seq) const {
        const auto n = [](int x) { return static_cast<std::size_t>(x); };
        return layout == AttentionLayout::bhsd ? Shape{n(shape.batch), n(heads), n(seq), n(shape.head_dim)}
                                               : Shape{n(shape.batch), n(seq), n(heads), n(shape.head_dim)};
    }

    /// `op`'s forward call; `in` and `params` are the caller's, alive as long as the call. A
    /// split-KV op's workspace is allocated here, the first time one needs more.
    OpCall call(const AttentionForwardOp& op, std::array<Tensor, 3>& in, std::array<void*, 2>& params) {
        in = {Tensor{dq.as<void>(), q_shape}, Tensor{dk.as<void>(), kv_shape}, Tensor{dv.as<void>(), kv_shape}};
        const std::array<ShapeView, 3> shapes{q_shape, kv_shape, kv_shape};
        const std::vector<Shape> slots = op.param_shapes(shapes, q_shape);
        if (slots.size() > 1 && (!partials || partials->size_bytes() < element_count(slots[1]) * 4))
            partials.emplace(dq.device(), element_count(slots[1]) * 4);
        params = {lse.as<void>(), slots.size() > 1 ? partials->as<void>() : nullptr};
        return {in, std::span(params).first(slots.size()), o.as<void>(), q_shape, shape.head_dim};
    }

    /// Values rounded to `dtype` (what the device holds and the reference reads), from
    /// xorshift64* streams, one per thread, seeded from the clock: 10⁹ in about a second.
    static std::vector<float> random(std::size_t n, Scalar dtype) {
        const std::uint64_t seed = std::chrono::steady_clock::now().time_since_epoch().count();
        std::vector<float> v(n);
        const std::size_t threads = std::max(1u, std::thread::hardware_concurrency()), share = n / threads + 1;
        std::vector<std::jthread> workers;
        for (std::size_t t = 0; t < threads; ++t)
            workers.emplace_back([&, t] {
                std::uint64_t state = (seed + t) * 0x9e3779b97f4a7c15ull | 1;
                for (std::size_t i = t * share; i < std::min(n, (t + 1) * share); ++i) {
                    state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
                    v[i] = from_16bit(
                        to_16bit(static_cast<float>((state * 2685821657736338717ull) >> 40) / 4194304.0f - 2.0f, dtype),
                        dtype);
                }
            });
        return v;
    }
    static DeviceBuffer upload(const Device& device, const std::vector<std::uint16_t>& host) {
        DeviceBuffer d(device, std::max<std::size_t>(16, host.size() * 2));
        if (!host.empty()) d.upload(std::span<const std::uint16_t>(host));
        return d;
    }
};

/// Runs `op` into NaN-poisoned outputs and compares them with the float64 reference.
AttentionCheck check(const AttentionForwardOp& op, Runtime& rt, const Stream& stream, AttentionTensors& t) {
    const AttentionShape& s = t.shape;
    t.o.fill(0xff);  // NaN in f16 and bf16
    t.lse.fill(0xff);
    std::array<Tensor, 3> in;
    std::array<void*, 2> params;
    op.forward(rt, stream, t.call(op, in, params));
    stream.synchronize();
    std::vector<std::uint16_t> stored(t.q.size());
    std::vector<float> lse(std::size_t(s.batch) * s.heads * s.seq);
    t.o.download(std::span(stored));
    t.lse.download(std::span(lse));
    const auto o = from_attention_layout(stored, s.heads, s.seq, s.head_dim, t.layout, s.dtype);
    return check_attention(s, o, lse, t.reference(), t.rows);
}

struct Timed {
    double us, b2b_us;
};
constexpr int back_to_back = 20;  // calls a graph holds for the back-to-back time

Timed time(const AttentionForwardOp& op, Runtime& rt, const Stream& stream, AttentionTensors& t, int iters) {
    std::array<Tensor, 3> in;
    std::array<void*, 2> params;
    const OpCall call = t.call(op, in, params);
    return {time_forward(op, rt, stream, call, iters),
            time_forward(op, rt, stream, call, std::max(3, iters / 10), back_to_back)};  // as many calls in all
}

std::string check_text(const AttentionCheck& c, const AttentionTensors& t) {
    const std::size_t all = std::size_t(t.shape.batch) * t.shape.heads * t.shape.seq;
    return fmt::format(
        "error ‖o−ref‖/‖ref‖ = {:.2e} (tolerance {:.0e}), log-sum-exp within {:.1e} (tolerance {:.0e}), "
        "against the float64 CPU reference on {}{}",
        c.error, c.tolerance, c.lse_error, AttentionCheck::lse_tolerance,
        c.rows == all ? "every row" : fmt::format("{} of {} rows", c.rows, all),
        c.passed() ? "" : "\n  WRONG: " + c.faults());
}

}  // namespace

int run_attention(const Common& common, int batch, const AttentionOptions& o, const std::string& config, int iters) {
    const AttentionShape s = shape_of(batch, o);
    const std::optional<AttentionTiles> given = config.empty() ? std::nullopt
                                                               : std::optional(parse_attention_config(config));
    if (given)  // tiles no kernel has at this head dim are a usage error, GPU or not
        if (auto why = given->unsupported_reason(s.head_dim); !why.empty()) throw UsageError(why);
    const Device device = gpu_or_explain("run");
    Runtime& rt = runtime(common);
    const DeviceTraits traits = DeviceTraits::of(device);
    Stream stream(device);
    const AttentionPick pick = given ? AttentionPick{*given, false}
                                     : pick_attention(s, traits, device.name(), driver_version(), rt.cache(),
                                                      layout_of(o));
    pick.tiles.validate(s.head_dim, traits);
    const std::string why = attention_dispatch_reason(s, traits, layout_of(o));
    const AttentionTiles dispatch_tiles = dispatch_attention(s, traits, layout_of(o));
    const std::string dispatched = attention_config(dispatch_tiles);
    const char* source = given ? "config" : pick.tuned ? "tuned" : "dispatch";
    std::string ran;
    if (pick.tuned)
        ran = fmt::format("\n  ran: the tuned winner stored for this problem, device and driver (dispatch picks {})",
                          dispatched);
    else if (given && *given != dispatch_tiles) ran = fmt::format("\n  ran: --config (dispatch picks {})", dispatched);

    const AttentionForwardOp op(s.dtype, s.head_dim, s.causal, pick.tiles, layout_of(o), 0, traits.multiprocessors);
    AttentionTensors t(device, s, layout_of(o));
    const auto [us, b2b_us] = time(op, rt, stream, t, std::max(1, iters));
    const auto start = std::chrono::steady_clock::now();
    const AttentionCheck c = check(op, rt, stream, t);
    const double reference_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double tflops = s.flops() / us / 1e6, b2b_tflops = s.flops() / b2b_us / 1e6;
    if (common.json) {
        const nlohmann::json j{{"kernel", op.kernel().id()},
                               {"problem", s.key()},
                               {"layout", o.layout},
                               {"config", attention_config(pick.tiles)},
                               {"dispatch", why},
                               {"dispatch_config", dispatched},
                               {"source", source},
                               {"device", device.name()},
                               {"relative_error", c.error},
                               {"lse_error", c.lse_error},
                               {"rows_checked", c.rows},
                               {"unwritten", c.unwritten},
                               {"tolerance", c.tolerance},
                               {"passed", c.passed()},
                               {"reference_s", reference_s},
                               {"flops", s.flops()},
                               {"median_us", us},
                               {"tflops", tflops},
                               {"b2b_us", b2b_us},
                               {"b2b_tflops", b2b_tflops}};
        fmt::print("{}\n", j.dump(2));
    } else {
        fmt::print(
            "{} [{}] on {}\n  problem: {} ({})\n  dispatch: {}{}\n  {} ({:.1f} s)\n  median {:.1f} µs over {} "
            "graph replays, {:.1f} TFLOP/s; back to back ({} a graph) {:.1f} µs, {:.1f} TFLOP/s\n",
            op.kernel().id(), attention_config(pick.tiles), device.name(), s.key(), o.layout, why, ran,
            check_text(c, t), reference_s, us, iters, tflops, back_to_back, b2b_us, b2b_tflops);
    }
    return c.passed() ? ok : failure;
}

int tune_attention(const Common& common, int batch, const AttentionOptions& o, int iters) {
    const AttentionShape s = shape_of(batch, o);
    const Device device = gpu_or_explain("tune");
    Runtime& rt = runtime(common);
    const DeviceTraits traits = DeviceTraits::of(device);
    Stream stream(device);
    AttentionTensors t(device, s, layout_of(o));
    struct Candidate {
        AttentionTiles tiles;
        double us;
        AttentionCheck check;
        std::string source_hash;
    };
    std::vector<Candidate> timed;
    std::vector<std::string> refused;
    for (AttentionTiles tiles : AttentionTiles::configurations()) {
        try {  // each tile shape with the split it needs
            tiles.validate(s.head_dim, traits);
            tiles.kv_splits = attention_kv_splits(s, tiles, traits, layout_of(o));
        } catch (const UsageError& e) {
            refused.push_back(e.what());
            continue;
        }
        const AttentionForwardOp op(s.dtype, s.head_dim, s.causal, tiles, layout_of(o), 0, traits.multiprocessors);
        const double us = time(op, rt, stream, t, std::max(1, iters)).us;
        timed.push_back({tiles, us, check(op, rt, stream, t), op.kernel().source_hash()});
    }
    std::ranges::sort(timed, {}, &Candidate::us);
    const auto winner = std::ranges::find_if(timed, [](const Candidate& c) { return c.check.passed(); });
    if (winner != timed.end())
        store_tuned(rt.cache(), TunedConfig{.kernel = std::string(attention_family),
                                            .shape = attention_tuning_key(s, layout_of(o)),
                                            .device = device.name(),
                                            .arch = traits.arch.name(),
                                            .driver = driver_version(),
                                            .source_hash = winner->source_hash,
                                            .config = attention_config(winner->tiles),
                                            .microseconds = winner->us});
    if (common.json) {
        nlohmann::json tried = nlohmann::json::array();
        for (const Candidate& c : timed)
            tried.push_back({{"config", attention_config(c.tiles)},
                             {"median_us", c.us},
                             {"tflops", s.flops() / c.us / 1e6},
                             {"relative_error", c.check.error},
                             {"passed", c.check.passed()}});
        fmt::print("{}\n",
                   nlohmann::json{{"problem", s.key()},
                                  {"winner", winner != timed.end() ? nlohmann::json(attention_config(winner->tiles))
                                                                   : nlohmann::json()},
                                  {"refused", refused},
                                  {"tried", tried}}
                       .dump(2));
    } else {
        fmt::print("{} on {} ({}, driver {}): {} configurations\n", s.key(), device.name(), traits.arch.name(),
                   driver_version(), timed.size());
        for (const Candidate& c : timed)
            fmt::print("  {:>9.1f} µs  {:>6.1f} TFLOP/s  {}{}\n", c.us, s.flops() / c.us / 1e6,
                       attention_config(c.tiles),
                       c.check.passed() ? "" : fmt::format("  WRONG (error {:.2e}), passed over", c.check.error));
        for (const auto& r : refused) fmt::print("  did not run: {}\n", r);
        if (winner != timed.end())
            fmt::print("  winner {}, stored: kjit run uses it from now on\n", attention_config(winner->tiles));
        else fmt::print("  no configuration matched the float64 reference: nothing stored\n");
    }
    return winner != timed.end() ? ok : failure;
}

namespace {

/// A problem `kjit check flash_attention2` runs when none is given, and the edge it is there for.
struct CheckProblem {
    AttentionShape shape;
    AttentionLayout layout;
    const char* why;
};
const CheckProblem check_problems[] = {
    {{2, 4, 2, 300, 517, 128, false, Scalar::bf16}, AttentionLayout::bhsd, "ragged lengths, grouped heads"},
    {{2, 4, 4, 257, 257, 128, true, Scalar::f16}, AttentionLayout::bhsd, "causal, lengths off every tile"},
    {{1, 8, 8, 1, 1000, 64, false, Scalar::bf16}, AttentionLayout::bhsd, "one query, many keys"},
    {{2, 8, 2, 1, 700, 128, false, Scalar::bf16}, AttentionLayout::bshd, "grouped heads of one query, packed"},
    {{1, 4, 2, 200, 90, 64, true, Scalar::f16}, AttentionLayout::bshd, "causal, fewer keys than queries, [B, S, H, D]"},
    {{2, 2, 2, 130, 130, 96, true, Scalar::bf16}, AttentionLayout::bhsd, "head dim 96"},
    {{1, 2, 2, 50, 0, 128, false, Scalar::bf16}, AttentionLayout::bshd, "no keys: O = 0, LSE = -inf"},
};

struct CheckRun {
    CheckRun(std::size_t problem_, const AttentionTiles& tiles_) : problem(problem_), tiles(tiles_) {}
    std::size_t problem;
    AttentionTiles tiles;
    std::optional<AttentionCheck> check;
    double us = NAN;
    std::string fault;
};

}  // namespace

int check_attention(const Common& common, int batch, const AttentionOptions& o, const std::vector<std::string>& config,
                    std::string_view family, bool failed_only, int iters) {
    const auto in_family = [&](const AttentionTiles& t) {
        return family == attention_sm90_family ? t.sm90 : family == attention_family ? !t.sm90 : true;
    };
    std::vector<CheckProblem> problems;
    if (o.given()) problems.push_back({shape_of(batch, o), layout_of(o), "the problem given"});
    else problems.assign(std::begin(check_problems), std::end(check_problems));
    // The configurations each problem's head dim has, holding every word of --config: said
    // before a GPU is asked for where there are none.
    // Each tile shape whole, and with its keys split in up to 4 shares where there are 2 key
    // tiles or more (split-KV's partial results and their combine).
    std::vector<CheckRun> runs;
    for (std::size_t p = 0; p < problems.size(); ++p) {
        const AttentionShape& s = problems[p].shape;
        const auto add = [&](const AttentionTiles& t) {
            if (config_holds(attention_config(t), config)) runs.emplace_back(p, t);
        };
        for (AttentionTiles t : AttentionTiles::configurations()) {
            if (!t.unsupported_reason(s.head_dim).empty() || !in_family(t)) continue;
            add(t);
            t.kv_splits = std::min(4, s.key_tiles(t.block_n));
            if (t.kv_splits > 1) add(t);
        }
    }
    if (runs.empty())
        throw UsageError(fmt::format("no flash_attention2 configuration{} takes {}",
                                     config.empty() ? "" : fmt::format(" holding {}", fmt::join(config, " ")),
                                     o.given() ? "the problem given" : "the built-in problems"));
    const Device device = gpu_or_explain("check");
    Runtime& rt = runtime(common);
    const DeviceTraits traits = DeviceTraits::of(device);
    Stream stream(device);
    // This device's configurations only (the Hopper ones on a 9.0 device, tiles whose shared memory fits).
    std::erase_if(runs, [&](const CheckRun& r) {
        return r.tiles.sm90 ? !traits.hopper()
                            : r.tiles.shared_bytes(problems[r.problem].shape.head_dim) >
                                  static_cast<unsigned>(traits.max_shared_bytes);
    });
    const auto started = std::chrono::steady_clock::now();
    constexpr int check_blocks = 3;
    std::optional<AttentionTensors> tensors;
    for (CheckRun& r : runs) {
        const CheckProblem& p = problems[r.problem];
        if (!tensors || !(tensors->shape == p.shape) || tensors->layout != p.layout)
            tensors.emplace(device, p.shape, p.layout);
        try {
            r.tiles.validate(p.shape.head_dim, traits);
            // A persistent grid of 3 blocks: each takes many of the problem's query tiles, the path the
            // device's whole grid runs on large problems.
            const AttentionForwardOp op(p.shape.dtype, p.shape.head_dim, p.shape.causal, r.tiles, p.layout, 0,
                                        check_blocks);
            r.check = check(op, rt, stream, *tensors);
            if (!r.check->passed()) r.fault = r.check->faults();
            std::array<Tensor, 3> in;
            std::array<void*, 2> params;
            r.us = time_forward(op, rt, stream, tensors->call(op, in, params), std::max(1, iters));
        } catch (const Error& e) {
            r.fault = e.what();
        }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const auto failing = std::ranges::count_if(runs, [](const CheckRun& r) { return !r.fault.empty(); });
    const auto optional_number = [](bool has, double x) { return has ? nlohmann::json(x) : nlohmann::json(); };
    if (common.json) {
        nlohmann::json list = nlohmann::json::array();
        for (const CheckRun& r : runs) {
            if (failed_only && r.fault.empty()) continue;
            list.push_back({{"problem", problems[r.problem].shape.key()},
                            {"layout", problems[r.problem].layout == AttentionLayout::bshd ? "bshd" : "bhsd"},
                            {"config", attention_config(r.tiles)},
                            {"passed", r.fault.empty()},
                            {"relative_error", optional_number(r.check.has_value(), r.check ? r.check->error : 0)},
                            {"lse_error", optional_number(r.check.has_value(), r.check ? r.check->lse_error : 0)},
                            {"median_us", optional_number(!std::isnan(r.us), r.us)},
                            {"fault", r.fault}});
        }
        fmt::print("{}\n", nlohmann::json{{"op", "flash_attention2"},
                                          {"device", device.name()},
                                          {"arch", traits.arch.name()},
                                          {"runs", list},
                                          {"failed", failing},
                                          {"seconds", seconds}}
                               .dump(2));
        return failing ? failure : ok;
    }
    std::size_t shown = problems.size();
    for (const CheckRun& r : runs) {
        if (failed_only && r.fault.empty()) continue;
        if (r.problem != shown) {
            shown = r.problem;
            const CheckProblem& p = problems[shown];
            fmt::print("\n{} [{}] ({})\n  {:<34} {:>9} {:>9}  {:<6} {:>9}\n", p.shape.key(),
                       p.layout == AttentionLayout::bshd ? "bshd" : "bhsd", p.why, "configuration", "error",
                       "lse error", "result", "µs");
        }
        fmt::print("  {:<34} {:>9} {:>9}  {:<6} {:>9}\n", attention_config(r.tiles),
                   r.check ? fmt::format("{:.2e}", r.check->error) : "-",
                   r.check ? fmt::format("{:.1e}", r.check->lse_error) : "-", r.fault.empty() ? "ok" : "FAIL",
                   std::isnan(r.us) ? "-" : fmt::format("{:.1f}", r.us));
    }
    if (failing) {
        fmt::print("\nfailed:\n");
        for (const CheckRun& r : runs)
            if (!r.fault.empty())
                fmt::print("  {} [{}]: {}\n", problems[r.problem].shape.key(), attention_config(r.tiles), r.fault);
    }
    fmt::print(
        "\nflash_attention2 on {} ({}): {} configurations on {} problems against the float64 CPU reference; {:.1f} "
        "s: {} ok, {} failed\n",
        device.name(), traits.arch.name(), runs.size(), problems.size(), seconds, runs.size() - failing, failing);
    return failing ? failure : ok;
}

}  // namespace kjit::cli
