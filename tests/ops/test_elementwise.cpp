// The elementwise ops on the CPU: their kernels compile, bad constants are refused.
#include <doctest/doctest.h>

#include <kjit/compile.hpp>
#include <kjit/elementwise.hpp>

#include "support.hpp"

using namespace kjit;

TEST_CASE("the elementwise ops' kernels compile for sm_80 and sm_90") {
    const AddOp add;
    const ConcatChannelsOp concat(3);
    const MaxPool2dOp pool(5, 1, 2);
    const UpsampleNearest2dOp up(2);
    for (const Kernel* k : {&add.kernel(), &concat.kernel(), &pool.kernel(), &up.kernel()})
        for (const char* arch : {"sm_80", "sm_90"}) {
            CAPTURE(k->id());
            const Compiled c = compile(*k, test::options_for(arch));
            CHECK(c.ptx.find(".entry " + k->entry_point_name()) != std::string::npos);
            CHECK(c.resources.spill_store_bytes == 0);
        }
    CHECK_THROWS_WITH_AS(MaxPool2dOp(3, 1, 2), doctest::Contains("0 <= pad <= kernel / 2"), UsageError);
    CHECK_THROWS_WITH_AS(UpsampleNearest2dOp(0), doctest::Contains("must be 1 to 16"), UsageError);
    CHECK_THROWS_WITH_AS(ConcatChannelsOp(0), doctest::Contains("at least one input"), UsageError);
}
