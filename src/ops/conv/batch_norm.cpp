// Inference BatchNorm folded into a per-channel scale and shift.
#include <cmath>

#include <fmt/format.h>
#include <kjit/conv.hpp>

#include "ops/op_checks.hpp"

namespace kjit {

using detail::require;

FoldedBatchNorm fold_batch_norm(std::span<const float> gamma, std::span<const float> beta, std::span<const float> mean,
                                std::span<const float> var, float eps) {
    const std::size_t n = gamma.size();
    require(beta.size() == n && mean.size() == n && var.size() == n,
            "BatchNorm tensors differ in length: gamma {}, beta {}, mean {}, var {}", n, beta.size(), mean.size(),
            var.size());
    require(eps >= 0, "BatchNorm eps = {} must not be negative", eps);
    FoldedBatchNorm bn{std::vector<float>(n), std::vector<float>(n)};
    for (std::size_t c = 0; c < n; ++c) {
        require(var[c] + eps > 0, "BatchNorm channel {}: var + eps = {} must be positive", c, var[c] + eps);
        const double scale = gamma[c] / std::sqrt(static_cast<double>(var[c]) + eps);
        bn.scale[c] = static_cast<float>(scale);
        bn.shift[c] = static_cast<float>(beta[c] - scale * mean[c]);
    }
    return bn;
}

}  // namespace kjit
