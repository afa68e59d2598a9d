// Argument packing: the void** array, run-time checks, compile-time checks of typed kernels.
#include <doctest/doctest.h>

#include "support.hpp"

using namespace kjit;

namespace {
const std::vector<Param> signature{{"x", {Scalar::f32, true}},
                                   {"n", {Scalar::i32}},
                                   {"scale", {Scalar::f64}},
                                   {"count", {Scalar::u64}},
                                   {"flag", {Scalar::boolean}}};

/// A typed kernel class as concrete kernels declare them.
class Scale : public TypedKernel<param<"in", float*>, param<"out", float*>, param<"n", std::int32_t>> {
public:
    explicit Scale(int factor) : TypedKernel("scale", {{"FACTOR", std::int64_t{factor}}}, 0) {}
};

template <class K, class... A>
concept launchable = requires(const K& k, const Stream& s, A... a) {
    k.launch(s, Dim3{}, Dim3{}, a...);
};
}  // namespace

TEST_CASE("the packer lays out each argument where cuLaunchKernel will read it") {
    float* x = reinterpret_cast<float*>(0x1000);
    ArgPack pack(signature, "k");
    pack.visit_ptr(x);
    pack.visit_i32(-7);
    pack.visit_f64(2.5);
    pack.visit_u64(1ull << 40);
    pack.visit_bool(true);
    pack.check_complete();
    REQUIRE(pack.size() == 5);
    void** p = pack.data();
    CHECK(*static_cast<float**>(p[0]) == x);
    CHECK(*static_cast<std::int32_t*>(p[1]) == -7);
    CHECK(*static_cast<double*>(p[2]) == 2.5);
    CHECK(*static_cast<std::uint64_t*>(p[3]) == (1ull << 40));
    CHECK(*static_cast<bool*>(p[4]) == true);
}

TEST_CASE("typed Arg values are checked against the signature, pointee type included") {
    float* x = reinterpret_cast<float*>(0x1000);
    ArgPack ok(signature, "k");
    for (const Arg& a : {Arg(x), Arg(std::int32_t{3}), Arg(1.0), Arg(std::uint64_t{9}), Arg(false)}) ok.push(a);
    ok.check_complete();
    CHECK(*static_cast<std::int32_t*>(ok.data()[1]) == 3);

    ArgPack wrong_pointee(signature, "k");
    CHECK_THROWS_WITH_AS(wrong_pointee.push(Arg(reinterpret_cast<std::int32_t*>(0x1000))),
                         doctest::Contains("argument 1 ('x') of kernel k must be f32*, but i32* was given"),
                         UsageError);
    ArgPack wrong_scalar(signature, "k");
    wrong_scalar.push(Arg(x));
    CHECK_THROWS_WITH_AS(wrong_scalar.push(Arg(std::int64_t{3})), doctest::Contains("must be i32, but i64 was given"),
                         UsageError);
}

TEST_CASE("a tensor map is passed by address: cuLaunchKernel copies its 128 bytes, nothing is copied before") {
    const std::vector<Param> with_map{{"map", {Scalar::tensor_map}}, {"n", {Scalar::i32}}};
    TensorMap map;
    map.opaque[0] = 0x1234;
    ArgPack pack(with_map, "k");
    pack.visit_tensor_map(map);
    pack.visit_i32(5);
    pack.check_complete();
    CHECK(pack.data()[0] == &map);
    ArgPack generic(with_map, "k");
    generic.push(Arg(map));
    CHECK(generic.data()[0] == &map);
    ArgPack wrong(with_map, "k");
    CHECK_THROWS_WITH_AS(wrong.visit_i32(1), doctest::Contains("('map') of kernel k must be tensormap, but i32"),
                         UsageError);
    ArgPack misplaced(signature, "k");
    CHECK_THROWS_WITH_AS(misplaced.visit_tensor_map(map), doctest::Contains("must be f32*, but tensormap was given"),
                         UsageError);
}

TEST_CASE("count mismatches are errors before anything reaches the driver") {
    ArgPack short_pack(signature, "k");
    short_pack.visit_ptr(nullptr);
    CHECK_THROWS_WITH_AS(short_pack.check_complete(),
                         doctest::Contains("takes 5 arguments but 1 were given; missing 'n' (i32)"), UsageError);
    ArgPack long_pack(std::span<const Param>(signature).first(1), "k");
    long_pack.visit_ptr(nullptr);
    CHECK_THROWS_WITH_AS(long_pack.visit_i32(1), doctest::Contains("too many arguments"), UsageError);
    ArgPack not_pointer(signature, "k");
    CHECK_THROWS_WITH_AS(not_pointer.visit_f32(1.0f), doctest::Contains("must be f32*, but f32 was given"), UsageError);
    ArgPack narrow(signature, "k");
    narrow.visit_ptr(nullptr);
    CHECK_THROWS_AS(narrow.visit_i16(1), UsageError);
}

TEST_CASE("typed kernels: the signature comes from the parameter list, launch() checks at compile time") {
    const auto sig = Scale::signature();
    REQUIRE(sig.size() == 3);
    CHECK(sig[0].name == "in");
    CHECK(sig[0].type == ParamType{Scalar::f32, true});
    CHECK(sig[2].type == ParamType{Scalar::i32, false});

    static_assert(launchable<Scale, float*, float*, std::int32_t>);
    static_assert(launchable<Scale, const float*, float*, std::int32_t>);  // const input is fine
    static_assert(!launchable<Scale, float*, float*>);                     // too few
    static_assert(!launchable<Scale, float*, float*, std::int32_t, int>);  // too many
    static_assert(!launchable<Scale, float*, float*, std::int64_t>);       // wrong width
    static_assert(!launchable<Scale, float*, float*, double>);             // no silent conversion
    static_assert(!launchable<Scale, int*, float*, std::int32_t>);         // wrong pointee

    // Construction needs kernels_src/scale.cu, which does not ship: a clear error, not a crash.
    CHECK_THROWS_WITH_AS(Scale(2), doctest::Contains("unknown kernel 'scale'"), UsageError);
}

TEST_CASE("a typed view of a kernel shares its state, and only fits the kernel's own signature") {
    const Kernel scale = test::scale_kernel();  // (f32* in, f32* out, i32 n)
    using ScaleView = TypedKernel<param<"in", float*>, param<"out", float*>, param<"n", std::int32_t>>;
    const ScaleView view(scale);
    CHECK(&view.state() == &scale.state());  // the same memos: one hot slot, one key per options
    CHECK(view.id() == scale.id());
    using WrongType = TypedKernel<param<"in", float*>, param<"out", float*>, param<"n", std::int64_t>>;
    CHECK_THROWS_WITH_AS(WrongType{scale}, doctest::Contains("its typed view must have the same signature"),
                         UsageError);
    using WrongName = TypedKernel<param<"x", float*>, param<"out", float*>, param<"n", std::int32_t>>;
    CHECK_THROWS_AS(WrongName{scale}, UsageError);
}
