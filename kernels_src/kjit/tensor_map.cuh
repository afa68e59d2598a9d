// The device side of a TMA tensor map: 128 opaque bytes, 64-byte aligned (CUtensorMap's layout),
// encoded on the host (include/kjit/tensor_map.hpp) and passed as a __grid_constant__ parameter.
#pragma once

namespace kjit {

struct alignas(64) TensorMap {
    unsigned long long opaque[16];
};

}  // namespace kjit
