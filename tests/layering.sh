#!/usr/bin/env bash
# scripts/check-layering on a scratch copy of the tree with wrong-way includes added: it must
# fail and name each one (the check itself can fail, so its pass on the real tree means something).
set -euo pipefail
source=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp -r "$source/src" "$source/include" "$scratch/"
sed -i '0,/^#include/s//#include <kjit\/model.hpp>\n#include/' "$scratch/src/jit/kernel.cpp"            # jit sees the executor
sed -i '0,/^#include/s//#include "model\/builtin_ops.hpp"\n#include/' "$scratch/src/ops/elementwise.cpp"  # ops see the executor
sed -i '0,/^#include/s//#include <kjit\/conv.hpp>\n#include/' "$scratch/include/kjit/runtime.hpp"        # a jit header sees ops
sed -i '0,/^#include/s//#include "jit\/log.hpp"\n#include/' "$scratch/src/cuda/stream.cpp"               # cuda sees jit
if out=$(bash "$source/scripts/check-layering" "$scratch"); then
  echo "check-layering passed a tree with wrong-way includes:"; echo "$out"; exit 1
fi
echo "$out"
for expected in "src/jit/kernel.cpp:.*kjit/model.hpp of the model layer" \
                "src/ops/elementwise.cpp:.*model/builtin_ops.hpp of the model layer" \
                "include/kjit/runtime.hpp:.*kjit/conv.hpp of the ops layer" \
                "src/cuda/stream.cpp:.*jit/log.hpp of the jit layer" \
                "4 wrong-way includes"; do
  grep -qE "$expected" <<<"$out" || { echo "missing: $expected"; exit 1; }
done
