// kjit/kjit.hpp — everything a user of kjit includes.
#pragma once
#include <kjit/args.hpp>
#include <kjit/cache.hpp>
#include <kjit/compile.hpp>
#include <kjit/conv.hpp>
#include <kjit/driver.hpp>
#include <kjit/error.hpp>
#include <kjit/kernel.hpp>
#include <kjit/log.hpp>
#include <kjit/ops.hpp>
#include <kjit/registry.hpp>
#include <kjit/runtime.hpp>
#include <kjit/runtime_op.hpp>
