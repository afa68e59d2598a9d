// Dispatch replayed over a bench run of every candidate (kjit_conv_bench --quick, with --nhwc,
// --grouped or neither): for each row, the candidate dispatch picks against the row's best.
#pragma once
#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <kjit/conv.hpp>
#include <nlohmann/json.hpp>

namespace kjit::test {

struct ReplayResult {
    int rows = 0;
    std::vector<std::string> over;  ///< "layer bB 1.23x" for each row whose pick took over `limit` × the best
    double worst = 0.0;             ///< the largest pick / best over the rows
};

/// `pick(attrs, shape)` names the candidate dispatch picks, as the run's "candidates" keys do.
template <class Pick>
ReplayResult replay_dispatch(const std::string& path, Pick pick, double limit = 1.15) {
    std::ifstream run(path);
    REQUIRE(run.good());
    ReplayResult out;
    for (std::string line; std::getline(run, line);) {
        const auto r = nlohmann::json::parse(line);
        if (!r.contains("layer")) continue;
        const int k = r["kernel"].get<int>(), stride = r["stride"].get<int>(), hw = r["hw"].get<int>();
        const Conv2dAttrs a{.kernel_h = k,
                            .kernel_w = k,
                            .stride_h = stride,
                            .stride_w = stride,
                            .pad_h = r.value("pad", k / 2),
                            .pad_w = r.value("pad", k / 2),
                            .groups = r.value("groups", 1)};
        const Conv2dShape s{r["batch"].get<int>(), r["c_in"].get<int>(), hw, hw, r["c_out"].get<int>()};
        const std::string picked = pick(a, s);
        const auto& timed = r["candidates"];
        CAPTURE(picked);
        REQUIRE(timed.contains(picked));  // dispatch picks among the candidates the bench times
        const double ratio = timed[picked].get<double>() / r["best_us"].get<double>();
        out.worst = std::max(out.worst, ratio);
        if (ratio > limit)
            out.over.push_back(
                fmt::format("{} b{} {:.2f}x [{}]", r["layer"].get<std::string>(), s.batch, ratio, picked));
        ++out.rows;
    }
    return out;
}

}  // namespace kjit::test
