// Fuzz target: a model graph (JSON from the user), planned for batch 2. Every input plans, or
// throws UsageError naming what is wrong; nothing else.
#include <kjit/error.hpp>
#include <kjit/log.hpp>
#include <kjit/model.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    try {
        const auto plan = kjit::ModelPlan::from_json(std::string_view(reinterpret_cast<const char*>(data), size), 2,
                                                     kjit::DeviceTraits(132, 232448, kjit::Arch(9, 0)));  // an H200
        for (const auto& node : plan.nodes())
            if (!node.op || plan.values()[node.output].shape.empty()) __builtin_trap();
    } catch (const kjit::UsageError&) {}
    return 0;
}
