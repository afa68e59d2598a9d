// kjit/kjit.hpp — everything a user of kjit includes, layer by layer.
#pragma once
// The JIT core: kernel objects, compilation, the cache, driver handles, the runtime.
#include <kjit/arch.hpp>
#include <kjit/args.hpp>
#include <kjit/cache.hpp>
#include <kjit/compile.hpp>
#include <kjit/driver.hpp>
#include <kjit/error.hpp>
#include <kjit/kernel.hpp>
#include <kjit/log.hpp>
#include <kjit/remote.hpp>
#include <kjit/runtime.hpp>
#include <kjit/signing.hpp>
#include <kjit/tuning.hpp>
#include <kjit/typed_kernel.hpp>
// Ops: the RuntimeOp interface and the shipped kernel families.
#include <kjit/attention.hpp>
#include <kjit/conv.hpp>
#include <kjit/conv_tuner.hpp>
#include <kjit/device_traits.hpp>
#include <kjit/elementwise.hpp>
#include <kjit/op_timing.hpp>
#include <kjit/output_check.hpp>
#include <kjit/registry.hpp>
#include <kjit/runtime_op.hpp>
// Networks: graphs of ops and their weights.
#include <kjit/model.hpp>
#include <kjit/safetensors.hpp>
