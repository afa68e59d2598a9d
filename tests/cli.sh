#!/usr/bin/env bash
# Tests of the kjit binary. Usage: cli.sh CASE KJIT HELPER. Each case fails with a message.
set -uo pipefail
case_name=$1 kjit=$2 helper=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL ($case_name): $*" >&2; exit 1; }
expect() {  # expect RC COMMAND...: runs it, keeps output in $out, checks the exit code
  local want=$1; shift
  out=$("$@" 2>&1); local rc=$?
  [[ $rc == "$want" ]] || fail "exit $rc, not $want: $* -> $out"
}
contains() { grep -qF -- "$1" <<<"$out" || fail "output lacks '$1': $out"; }
small_graph() {  # a conv stem, a 1x1 conv and a residual add
  cat <<'EOF'
{"inputs": [{"name": "x", "shape": ["B", 3, 16, 16]}], "outputs": ["sum"],
 "nodes": [{"name": "stem", "op": "conv2d_bn_silu", "inputs": ["x"], "attrs": {"c_out": 16, "kernel": 3, "pad": 1}},
           {"name": "head", "op": "conv2d_bn_silu", "inputs": ["stem"], "attrs": {"c_out": 16}},
           {"name": "sum", "op": "add", "inputs": ["head", "stem"]}]}
EOF
}
shapes_error() {  # shapes_error JSON TEXT: kjit tune --shapes on a file holding JSON is a usage error saying TEXT
  echo "$1" >"$dir/shapes.json"
  expect 2 "$kjit" tune conv2d_bn_silu --shapes "$dir/shapes.json" --cache-dir "$dir"
  contains "$2"
}

case $case_name in
warm)  # no GPU needed: sm_90 from the command line; a second run is all hits
  expect 0 "$kjit" warm --arch sm_90 --kernel conv2d_bn_silu_gemm_forward --cache-dir "$dir" -j 2
  contains "24 compiled, 0 already cached, 0 failed"
  expect 0 "$kjit" warm --arch sm_90 --kernel conv2d_bn_silu_gemm_forward --cache-dir "$dir" --json
  contains '"compiled": 0'
  contains '"cached": 24'
  ;;
warm-sm90a)  # the TMA kernels build for sm_90a, also when warming for sm_90 devices; never for others
  expect 0 "$kjit" warm --arch sm_90a --kernel conv2d_bn_silu_gemm_tma_forward --cache-dir "$dir" -j 2
  contains "14 compiled, 0 already cached, 0 failed"
  expect 0 "$kjit" warm --arch sm_90 --kernel conv2d_bn_silu_gemm_tma_forward --cache-dir "$dir" -j 2
  contains "0 compiled, 14 already cached, 0 failed"
  expect 0 "$kjit" warm --arch sm_80 --kernel conv2d_bn_silu_gemm_tma_forward --cache-dir "$dir" -j 2
  contains "0 compiled, 0 already cached, 0 failed"
  contains "14 arch-specific configurations skipped"
  expect 0 "$kjit" cache ls --cache-dir "$dir"
  grep -q "sm_80" <<<"$out" && fail "an sm_80 entry of an sm_90a-only kernel: $out"
  args=(conv2d_bn_silu_gemm_tma_forward -D BLOCK_M=128 -D BLOCK_N=128 -D STAGES=5 -D GROUP_M=8 --cache-dir "$dir")
  expect 0 "$kjit" ptx "${args[@]}" --arch sm_90a
  contains "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32"
  contains "cp.async.bulk.tensor.3d"
  expect 0 "$kjit" ptx "${args[@]}" --arch sm_90 --resources  # a 9.0 device's build is the sm_90a one
  contains "for sm_90a:"
  expect 2 "$kjit" ptx "${args[@]}" --arch sm_80
  contains "built for sm_90a only, not for sm_80"
  ;;
ptx)  # the entry symbol and TF32 tensor-core MMAs; the source; the resource report
  args=(conv2d_bn_silu_gemm_forward -D BLOCK_M=128 -D BLOCK_N=128 -D BLOCK_K=32 -D GROUP_M=8 --arch sm_90 --cache-dir "$dir")
  expect 0 "$kjit" ptx "${args[@]}"
  contains ".entry conv2d_bn_silu_gemm_forward_entry_point"
  contains "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
  expect 0 "$kjit" ptx "${args[@]}" --source
  contains 'extern "C" __global__ void __launch_bounds__(256) conv2d_bn_silu_gemm_forward_entry_point'
  expect 0 "$kjit" ptx "${args[@]}" --resources --json
  contains '"registers":'
  ;;
export-import)  # a warmed cache ships: export, import into an empty database, verify
  expect 0 "$kjit" warm --arch sm_90 --kernel axpby --cache-dir "$dir/a"
  expect 0 "$kjit" cache export "$dir/shipped.sqlite3" --arch sm_90 --cache-dir "$dir/a"
  contains "exported 4 entries"
  expect 0 "$kjit" cache import "$dir/shipped.sqlite3" --cache-dir "$dir/b"
  contains "imported 4, kept 0"
  expect 0 "$kjit" cache verify --cache-dir "$dir/b"
  contains "sound"
  expect 0 "$kjit" cache import "$dir/shipped.sqlite3" --cache-dir "$dir/b"
  contains "imported 0, kept 4"
  expect 0 "$kjit" warm --arch sm_90 --kernel axpby --cache-dir "$dir/b"
  contains "0 compiled, 4 already cached"
  # A 9.0 device also loads the sm_90a kernels: exporting sm_90 ships them; sm_90a alone, only them.
  expect 0 "$kjit" warm --arch sm_90 --kernel conv2d_bn_silu_gemm_tma_forward --cache-dir "$dir/a" -j 2
  expect 0 "$kjit" cache export "$dir/hopper.sqlite3" --arch sm_90 --cache-dir "$dir/a"
  contains "exported 18 entries"
  expect 0 "$kjit" cache export "$dir/tma.sqlite3" --arch sm_90a --cache-dir "$dir/a"
  contains "exported 14 entries"
  # Tuned winners travel with the entries of their devices' arch; ls --tuned lists them; only clear --tuned
  # removes them.
  layer=b1_c64x56x56_o64_k1x1_s1x1_p0x0_g1 config="BLOCK_M=64 BLOCK_N=64 BLOCK_K=32 GROUP_M=8 SPLIT_K=1"
  "$helper" sql "$dir/a/kjit.sqlite3" "INSERT INTO tuned_winners VALUES
    ('conv2d_bn_silu', '$layer', 'NVIDIA H200', 'sm_90', '580.159.04', '0123456789abcdef0123456789abcdef',
     '$config', 12.5, 1764806400),
    ('conv2d_bn_silu', '$layer', 'NVIDIA A100-SXM4-80GB', 'sm_80', '570.86.15', 'fedcba9876543210fedcba9876543210',
     '$config', 20.0, 1764806400)" || fail "could not store winners"
  expect 0 "$kjit" cache export "$dir/h200.sqlite3" --arch sm_90 --cache-dir "$dir/a"
  contains "exported 18 entries and 1 tuned winners"
  expect 0 "$kjit" cache export "$dir/all.sqlite3" --cache-dir "$dir/a"
  contains "and 2 tuned winners"
  expect 0 "$kjit" cache import "$dir/h200.sqlite3" --cache-dir "$dir/c"
  contains "1 tuned winners added"
  expect 0 "$kjit" cache import "$dir/all.sqlite3" --cache-dir "$dir/c"
  contains "1 tuned winners added"  # the H200's is here already
  expect 0 "$kjit" cache ls --tuned --cache-dir "$dir/c"
  contains "conv2d_bn_silu       $layer       NVIDIA H200            sm_90  580.159.04  01234567      12.5  2025-12-04 00:00"
  contains "2 tuned winners;"
  expect 0 "$kjit" cache ls --tuned --json --cache-dir "$dir/c"
  contains '"source_hash": "fedcba9876543210fedcba9876543210"'
  expect 0 "$kjit" cache stats --cache-dir "$dir/c"
  contains "2 tuned winners"
  expect 0 "$kjit" cache clear --cache-dir "$dir/c"
  contains "removed 18 entries; kept 2 tuned winners (\`kjit cache clear --tuned\` removes them)"
  expect 0 "$kjit" cache prune --max-size 0 --cache-dir "$dir/c"
  contains "kept 2 tuned winners"
  expect 0 "$kjit" cache clear --tuned --cache-dir "$dir/c"
  contains "removed 0 entries; removed 2 tuned winners"
  expect 0 "$kjit" cache ls --tuned --cache-dir "$dir/c"
  contains "0 tuned winners;"
  ;;
verify)  # a byte flipped inside a stored blob is found and named; import rejects it
  expect 0 "$kjit" warm --arch sm_90 --kernel axpby --cache-dir "$dir"
  expect 0 "$kjit" cache export "$dir/shipped.sqlite3" --cache-dir "$dir"
  "$helper" flip "$dir/kjit.sqlite3" || fail "could not flip a byte"
  expect 1 "$kjit" cache verify --cache-dir "$dir"
  contains "cubin checksum mismatch"
  contains "\`kjit warm\` replaces them now"
  expect 0 "$kjit" warm --arch sm_90 --kernel axpby --cache-dir "$dir"  # the advice works
  contains "1 compiled, 3 already cached"
  expect 0 "$kjit" cache verify --cache-dir "$dir"
  "$helper" flip "$dir/shipped.sqlite3" || fail "could not flip a byte"
  expect 1 "$kjit" cache import "$dir/shipped.sqlite3" --cache-dir "$dir/fresh"
  contains "rejected 1"
  # Export leaves out an entry that fails its checksum, and says so: exit 1.
  "$helper" flip "$dir/fresh/kjit.sqlite3" || fail "could not flip a byte"
  expect 1 "$kjit" cache export "$dir/reshipped.sqlite3" --cache-dir "$dir/fresh"
  contains "exported 2 entries"
  contains "left out 1 entries that fail their checksums"
  expect 0 "$kjit" cache import "$dir/reshipped.sqlite3" --cache-dir "$dir/clean"
  contains "imported 2, kept 0 already here, rejected 0"
  # Exports that would write nothing are errors; a cache cannot import its own file.
  expect 2 "$kjit" cache export "" --cache-dir "$dir"
  contains "needs the name of the new cache file"
  expect 2 "$kjit" cache export "$dir/x.sqlite3" --arch garbage --cache-dir "$dir"
  contains "garbage"
  [[ -e $dir/x.sqlite3 ]] && fail "an export with a bad --arch wrote $dir/x.sqlite3"
  expect 2 timeout 20 "$kjit" cache import "$dir/kjit.sqlite3" --cache-dir "$dir"
  contains "is this cache's own file"
  ;;
warm-unstored)  # a warm that could not store what it compiled says so and fails: 2 none stored, 1 some
  : >"$dir/file"
  expect 2 "$kjit" warm --arch sm_90 --kernel axpby --cache-dir "$dir/file"
  contains "4 compiled, 0 already cached, 0 failed"
  contains "; 0 of them stored in $dir/file/kjit.sqlite3"
  contains "only 0 of the 4 kernels this warm produced are stored"
  expect 2 "$kjit" warm --arch sm_90 --kernel axpby --cache-dir "$dir/file" --json
  contains '"stored": 0'
  # A full disk part-way (a file size limit, SIGXFSZ ignored so writes fail with EFBIG): 1.
  expect 1 bash -c "trap '' XFSZ; ulimit -f 150; exec \"\$0\" \"\$@\"" "$kjit" warm --arch sm_90 \
    --kernel conv2d_bn_silu_direct_forward --cache-dir "$dir/full" -j 1
  contains "8 compiled, 0 already cached, 0 failed"
  stored=$(sed -n 's/.*only \([0-9]*\) of the 8 kernels this warm produced are stored.*/\1/p' <<<"$out")
  [[ -n $stored && $stored -ge 1 && $stored -lt 8 ]] || fail "a partial warm should store 1-7 of 8: $out"
  expect 0 "$kjit" cache stats --cache-dir "$dir/full" --json
  contains "\"entries\": $stored,"
  # A database of a newer kjit's schema is left untouched: nothing stored, 2.
  expect 0 "$kjit" warm --arch sm_90 --kernel axpby --cache-dir "$dir/newer"
  "$helper" sql "$dir/newer/kjit.sqlite3" "DELETE FROM kernels; UPDATE kjit_schema SET version = 99" ||
    fail "could not set the schema version"
  expect 2 "$kjit" warm --arch sm_90 --kernel axpby --cache-dir "$dir/newer" -j 2
  contains "4 compiled, 0 already cached, 0 failed in"
  contains "(2 jobs); 0 of them stored in $dir/newer/kjit.sqlite3"
  contains "written by a newer kjit (schema 99"
  ;;
warm-claimed)  # a kernel another live process is compiling: the others first, a line each as it finishes, then its entry
  # The key of one kernel, from a scratch cache.
  expect 0 "$kjit" warm --arch sm_90 --kernel conv2d_bn_silu_gemm_forward --cache-dir "$dir/scratch" -j 2
  expect 0 "$kjit" cache ls --cache-dir "$dir/scratch" --json
  key=$(sed -n 's/.*"key": "\([0-9a-f]*\)".*/\1/p' <<<"$out" | head -1)
  [[ -n $key ]] || fail "no key in: $out"
  # The warm's cache, holding a claim on that key by a live process of this host.
  expect 0 "$kjit" warm --arch sm_90 --kernel axpby --cache-dir "$dir/c"
  sleep 1800 &  # outlives the wait below, however slow the machine's compiles
  holder=$!
  trap 'kill $holder 2>/dev/null; rm -rf "$dir"' EXIT
  "$helper" sql "$dir/c/kjit.sqlite3" "INSERT INTO claims (key, host, pid, expires_at) VALUES ('$key', '$(uname -n)', \
    $holder, strftime('%s', 'now') + 1800)" || fail "could not insert a claim"
  "$kjit" warm --arch sm_90 --kernel conv2d_bn_silu_gemm_forward --cache-dir "$dir/c" -j 1 >"$dir/log" 2>"$dir/err" &
  warm=$!
  # Every other kernel done, a line each in the file (stdout is not a terminal), while the warm
  # waits for the claimed one: up to 10 minutes (23 compiles on one job of a loaded 2-core
  # machine under ASan took over the 1 minute this waited before).
  for _ in $(seq 6000); do
    [[ $(wc -l <"$dir/log") -ge 23 ]] && grep -qF "being compiled by another process" "$dir/err" && break
    kill -0 $warm 2>/dev/null || break
    sleep 0.1
  done
  kill -0 $warm 2>/dev/null || fail "the warm ended while the claim stood: $(cat "$dir/log" "$dir/err")"
  [[ $(wc -l <"$dir/log") == 23 ]] || fail "23 lines expected while the claim stands: $(cat "$dir/log")"
  grep -qF "1 kernel is being compiled by another process" "$dir/err" || fail "no word of the claim: $(cat "$dir/err")"
  kill $holder
  wait $holder 2>/dev/null  # its owner gone, the claim is taken over
  wait $warm || fail "the warm failed: $(cat "$dir/log" "$dir/err")"
  grep -qF "24 compiled, 0 already cached, 0 failed" "$dir/log" || fail "$(cat "$dir/log")"
  ;;
check)  # kjit check --compile-only: every configuration compiled and inspected; one made wrong on purpose is named
  expect 0 "$kjit" check axpby --compile-only --arch sm_90 --cache-dir "$dir/c"
  contains "axpby: 4 configurations for sm_90 (4 compiled, 0 unchanged from the cache) in"
  contains "4 ok, 0 failed"
  # Kernels edited in a scratch kernels dir: the configurations with ITEMS=4 no longer compile.
  cp -r "$(dirname "$0")/../kernels_src" "$dir/kernels"
  sed -i 's|^    constexpr long long TILE|    static_assert(ITEMS != 4, "made wrong on purpose");\n&|' "$dir/kernels/axpby.cu"
  expect 1 env KJIT_KERNELS_DIR="$dir/kernels" "$kjit" check axpby --compile-only --arch sm_90 --cache-dir "$dir/c"
  contains "(4 compiled, 0 unchanged from the cache)"  # the file changed: every key of it
  contains "2 ok, 2 failed"
  contains "axpby__f32__f32__256__4                                          sm_90           -  FAIL: does not compile: "
  contains "error: static assertion failed with \"made wrong on purpose\""
  # The failing ones last.
  [[ $(grep -c FAIL <<<"$(tail -3 <<<"$out")") == 2 ]] || fail "the failing configurations are not last: $out"
  expect 1 env KJIT_KERNELS_DIR="$dir/kernels" "$kjit" check axpby --compile-only --arch sm_90 --cache-dir "$dir/c" \
    --json
  contains '"failed": 2'
  contains '"compiled": 2'  # again: the two that compiled are in the cache, the failing two try again
  contains '"ok": false'
  expect 2 "$kjit" check convolution --compile-only --arch sm_90 --cache-dir "$dir/c"
  contains "unknown op 'convolution': kjit check takes conv2d_bn_silu, flash_attention2, axpby,"
  # What is wrong with a GPU check's input is said without a GPU.
  expect 2 "$kjit" check axpby --arch sm_90 --cache-dir "$dir/c"
  contains "--arch is for --compile-only"
  expect 2 "$kjit" check axpby --cache-dir "$dir/c"
  contains "axpby is a kernel with no op to run against a reference: kjit check axpby --compile-only"
  expect 2 "$kjit" check conv2d_bn_silu --config SPLIT_K=9 --cache-dir "$dir/c"
  contains "no configuration of conv2d_bn_silu takes its built-in layers and holds SPLIT_K=9"
  expect 2 "$kjit" check conv2d_bn_silu_depthwise_forward --batch 1 --cin 8 --cout 8 --hw 5 5 --cache-dir "$dir/c"
  contains "no configuration of conv2d_bn_silu_depthwise_forward takes the layers given"
  expect 2 "$kjit" check conv2d_bn_silu --compile-only --batch 1 --cin 8 --cout 8 --hw 5 5 --cache-dir "$dir/c"
  contains "it takes no layer or attention problem, --shapes or --config"
  expect 2 "$kjit" check flash_attention2 --compile-only --heads 4 --seq 10 --cache-dir "$dir/c"
  contains "it takes no layer or attention problem, --shapes or --config"
  expect 2 "$kjit" check flash_attention2 --config BLOCK_M=999 --cache-dir "$dir/c"
  contains "no flash_attention2 configuration holding BLOCK_M=999 takes the built-in problems"
  expect 2 "$kjit" check flash_attention2_forward_sm90 --head-dim 96 --heads 2 --seq 10 --cache-dir "$dir/c"
  contains "no flash_attention2 configuration takes the problem given"
  # A family named alone keeps to its own mainloop's tiles.
  expect 2 "$kjit" check flash_attention2_forward --config SM90=1 --cache-dir "$dir/c"
  contains "no flash_attention2 configuration holding SM90=1 takes the built-in problems"
  expect 2 "$kjit" check flash_attention2 --batch 1 --heads 2 --seq 10 --head-dim 80 --cache-dir "$dir/c"
  contains "head_dim 80 has no kernel: use 64, 96 or 128"
  expect 2 "$kjit" check flash_attention2 --batch 1 --cin 8 --cout 8 --hw 5 5 --cache-dir "$dir/c"
  contains "not a conv layer's options, --shapes or --changed"
  expect 2 "$kjit" check add --heads 4 --seq 10 --cache-dir "$dir/c"
  contains "are flash_attention2's: add takes a layer or its built-in ones"
  expect 2 "$kjit" check add --batch 1 --cin 2 --hw 3 3 --groups 2 --cache-dir "$dir/c"
  contains "add takes no --kernel-size, --stride, --pad or --groups"
  expect 2 "$kjit" check maxpool2d --batch 1 --cin 2 --hw 2 2 --kernel-size 3 3 --pad 2 --cache-dir "$dir/c"
  contains "0 <= pad <= kernel / 2"
  expect 2 "$kjit" check maxpool2d --kernel-size 3 5 --cache-dir "$dir/c"
  contains "maxpool2d takes a square window (--kernel-size K K), --stride and --pad, and no --groups"
  # The chain's pools keep the size: a stride, a padding other than K / 2 or an even window is refused, not ignored.
  for bad in "--kernel-size 5 5 --stride 2" "--kernel-size 5 5 --pad 1" "--kernel-size 4 4" "--groups 2"; do
    # shellcheck disable=SC2086  # the options split on purpose
    expect 2 "$kjit" check maxpool2d_chain $bad --cache-dir "$dir/c"
    contains "maxpool2d_chain takes an odd square window (--kernel-size K K) and no --stride, --pad or --groups"
  done
  expect 2 "$kjit" check add --kernel-size 3 3 --cache-dir "$dir/c"
  contains "add takes no --kernel-size, --stride, --pad or --groups"
  expect 2 "$kjit" check cast --batch 1 --cin 2 --hw 3 3 --kernel-size 3 3 --cache-dir "$dir/c"
  contains "cast takes no --kernel-size, --stride, --pad or --groups"
  # Every pair of types is a configuration: six casts.
  expect 0 "$kjit" check cast --compile-only --arch sm_80 --cache-dir "$dir/c"
  contains "cast: 6 configurations for sm_80"
  expect 2 "$kjit" check maxpool2d --batch 1 --cin 2 --cout 4 --hw 5 5 --kernel-size 3 3 --cache-dir "$dir/c"
  contains "maxpool2d takes no --cout: its output has its input's channels"
  "$kjit" check --help > "$dir/help"
  grep -q "The layer options each op takes" "$dir/help" || fail "kjit check --help lacks each op's layer options"
  ;;
check-gpu)  # kjit check on the GPU: every configuration against the reference; kernels made wrong on purpose are caught
  # Depthwise outputs in the last column never stored; add wrong at one element. The edits are
  # checked before the GPU is asked for, so a kernel rewritten under them fails here on any machine.
  cp -r "$(dirname "$0")/../kernels_src" "$dir/kernels"
  break_kernel() {  # break_kernel FILE SED-SCRIPT: the edit must change FILE
    cp "$dir/kernels/$1" "$dir/before"
    sed -i "$2" "$dir/kernels/$1"
    cmp -s "$dir/before" "$dir/kernels/$1" && fail "the edit that breaks $1 on purpose no longer matches it: update cli.sh"
    return 0
  }
  break_kernel conv2d_bn_silu_depthwise_forward.cu \
    's|^    if (y_bytes == 16) {|    if (ow + PIX >= OW) return;  // made wrong on purpose\n&|'
  break_kernel add.cu 's|\(y\[img \* y_stride + e\] = a\[img \* a_stride + e\] + b\[img \* b_stride + e\]\);|\1 + (i == 5 ? 1.0f : 0.0f);|'
  if [[ ! -e /dev/nvidia0 ]]; then echo "no GPU here: kjit check's GPU half is checked on one (scripts/gpu-check)"; exit 77; fi
  layer=(--batch 3 --cin 13 --cout 13 --hw 9 7 --kernel-size 3 3 --pad 1 --groups 13)
  expect 0 "$kjit" check conv2d_bn_silu_depthwise_forward "${layer[@]}" --cache-dir "$dir/c"
  contains "b3_c13x9x7_o13_k3x3_s1x1_p1x1_g13 (the layer given)"
  contains " 0 failed"
  expect 0 "$kjit" check add --cache-dir "$dir/c" --json
  contains '"failed": 0'
  contains '"config": "add__f32__256"'
  # The broken kernels: each fault caught, named.
  expect 1 env KJIT_KERNELS_DIR="$dir/kernels" "$kjit" check conv2d_bn_silu_depthwise_forward "${layer[@]}" \
    --cache-dir "$dir/c"
  contains "outputs never written (still NaN)"
  contains "first wrong: y[0,0,0,4] = NaN, expected "
  contains "b3_c13x9x7_o13_k3x3_s1x1_p1x1_g13 [BLOCK_H="
  grep -q " 0 unchanged from the cache" <<<"$out" || fail "the edited kernel's configurations were not all recompiled: $out"
  [[ $(tail -1 <<<"$out") == *" 0 ok,"* ]] || fail "a configuration survived the broken store: $out"
  expect 1 env KJIT_KERNELS_DIR="$dir/kernels" "$kjit" check add --cache-dir "$dir/c"
  contains "first wrong: y[0,0,0,5] = "
  contains "add on [1,1,1,1]"  # its one element is right: listed, ok
  contains "(1 compiled, 0 unchanged from the cache)"
  expect 1 env KJIT_KERNELS_DIR="$dir/kernels" "$kjit" check add --failed --cache-dir "$dir/c"
  grep -q "add on \[1,1,1,1\]" <<<"$out" && fail "--failed listed a passing configuration: $out"
  contains "1 ok, 2 failed"
  # Rerun: nothing recompiles; --changed then runs nothing.
  expect 0 env KJIT_KERNELS_DIR="$dir/kernels" "$kjit" check add --cache-dir "$dir/c" --changed
  contains "(0 compiled, 1 unchanged from the cache)"
  contains "configurations of unchanged kernels not rerun (--changed)"
  ;;
verify-damaged)  # a damaged file is reported (exit 1) with where it went; the advice given works
  printf 'not a database at all, %.0s' {1..200} >"$dir/kjit.sqlite3"
  expect 1 "$kjit" cache verify --cache-dir "$dir"
  contains "fault: damaged ("
  contains "moved it to $dir/kjit.sqlite3.damaged-"
  contains "kjit warm\` rebuilds it"
  ls "$dir"/kjit.sqlite3.damaged-* >/dev/null || fail "the damaged file is gone"
  expect 0 "$kjit" cache verify --cache-dir "$dir"  # the fresh file is sound
  contains "sound"
  rm -rf "${dir:?}"/*
  expect 0 "$kjit" warm --arch sm_90 --kernel axpby --cache-dir "$dir"
  truncate -s 8192 "$dir/kjit.sqlite3"
  expect 1 "$kjit" cache verify --cache-dir "$dir"
  contains "moved it to $dir/kjit.sqlite3.damaged-"
  rm -rf "${dir:?}"/*
  # Corrupt index pages: verify names them and advises clear, which sets the file aside.
  expect 0 "$kjit" warm --arch sm_90 --kernel axpby --cache-dir "$dir"
  "$helper" corrupt-index "$dir/kjit.sqlite3" || fail "could not corrupt the index"
  expect 1 "$kjit" cache verify --cache-dir "$dir"
  contains "fault: integrity: "
  contains "\`kjit cache clear\` sets the file aside"
  expect 0 "$kjit" cache clear --cache-dir "$dir"
  contains "moved it to $dir/kjit.sqlite3.damaged-"
  contains "every entry is gone"
  expect 0 "$kjit" cache verify --cache-dir "$dir"
  contains "sound"
  expect 0 "$kjit" warm --arch sm_90 --kernel axpby --cache-dir "$dir"
  contains "4 compiled"
  # kjit's tables with a column missing: "not a kjit cache" in one line, the file left as it was;
  # an import blames the file it read.
  "$helper" sql "$dir/kjit.sqlite3" "ALTER TABLE kernels DROP COLUMN log" || fail "could not drop a column"
  expect 2 "$kjit" cache import "$dir/kjit.sqlite3" --cache-dir "$dir/other"
  contains "$dir/kjit.sqlite3 is not a kjit cache (its kernels table lacks column log)"
  expect 1 "$kjit" cache ls --cache-dir "$dir"
  contains "it is not a kjit cache (its kernels table lacks column log); it is left untouched"
  [[ $(grep -c . <<<"$out") -le 2 ]] || fail "more than a warning and an error: $out"
  ;;
prune)  # least recently used first, down to the size asked for
  expect 0 "$kjit" warm --arch sm_90 --kernel conv2d_bn_silu_direct_forward --cache-dir "$dir"
  expect 0 "$kjit" cache prune --max-size 200K --cache-dir "$dir"  # K as stats counts: 1000 bytes
  expect 0 "$kjit" cache stats --cache-dir "$dir" --json
  bytes=$(sed -n 's/^  "bytes": \([0-9]*\),$/\1/p' <<<"$out")
  [[ -n $bytes && $bytes -le 200000 && $bytes -gt 0 ]] || fail "after prune the blobs total $bytes bytes: $out"
  expect 0 "$kjit" cache prune --max-size 1mIb --cache-dir "$dir"  # units ignore case
  contains "removed 0 entries"
  expect 2 "$kjit" cache prune --max-size 17179869184T --cache-dir "$dir"  # wrapped to a small size once
  contains "larger than 2^64 bytes"
  expect 0 "$kjit" cache stats --cache-dir "$dir" --json
  contains "\"bytes\": $bytes,"
  expect 0 "$kjit" cache verify --cache-dir "$dir"
  ;;
usage)  # usage errors exit 2 and say what to do
  expect 2 "$kjit" warm --cache-dir "$dir" --arch sm_12
  contains "unsupported arch 'sm_12'"
  for arch in sm_80a sm_75a sm_90f; do  # suffixed targets NVRTC has not: refused before any compile
    expect 2 "$kjit" warm --cache-dir "$dir" --arch $arch --kernel axpby
    contains "unsupported arch '$arch'"
    contains "sm_90, sm_90a,"
  done
  expect 2 "$kjit" ptx no_such_kernel --arch sm_90 --cache-dir "$dir"
  contains "unknown kernel 'no_such_kernel'"
  expect 2 "$kjit" ptx conv2d_bn_silu_gemm_forward -D BLOCK_M=64 --arch sm_90 --cache-dir "$dir"
  contains "constants BLOCK_N, BLOCK_K, GROUP_M of kernel conv2d_bn_silu_gemm_forward are missing"
  expect 2 "$kjit" ptx conv2d_bn_silu_gemm_forward -D BLOCK_Q=1 --arch sm_90 --cache-dir "$dir"
  contains "has no constant 'BLOCK_Q'"
  expect 2 "$kjit" cache prune --max-size lots --cache-dir "$dir"
  contains "give a byte count or a size like"
  expect 2 "$kjit" cache import /etc/hostname --cache-dir "$dir"
  contains "is not a kjit cache"
  expect 2 "$kjit" cache import "$dir/missing-file" --cache-dir "$dir"
  expect 2 "$kjit" run conv2d_bn_silu --batch -3 --cin 8 --cout 8 --hw 4 4
  contains "Value -3 not in range"
  expect 2 "$kjit" run conv2d_bn_silu --batch 1 --cin x --cout 8 --hw 4 4
  contains "cin"
  expect 2 "$kjit" tune conv2d_bn_silu --shapes "$dir/no-such-file.json" --cache-dir "$dir"
  contains "File does not exist"
  # flash_attention2: what is wrong with the problem or the tiles is said before a GPU is asked for.
  expect 2 "$kjit" run flash_attention2 --batch 2 --heads 8 --seq 100 --head-dim 80
  contains "head_dim 80 has no kernel: use 64, 96 or 128"
  expect 2 "$kjit" run flash_attention2 --batch 2 --heads 6 --kv-heads 4 --seq 100
  contains "kv_heads 4 must divide heads 6"
  expect 2 "$kjit" run flash_attention2 --batch 2 --heads 8
  contains "give the problem: flash_attention2 --batch B --heads H --seq S"
  expect 2 "$kjit" run flash_attention2 --batch 2 --heads 8 --seq 100 --dtype f32
  contains "--dtype: f32 not in {bf16,f16}"
  expect 2 "$kjit" run flash_attention2 --batch 2 --heads 8 --seq 100 --config "BLOCK_M=64"
  contains "is not '[SM90=1] BLOCK_M=<rows> BLOCK_N=<keys> [KV_SPLITS=<shares>]'"
  expect 2 "$kjit" run flash_attention2 --batch 2 --heads 8 --seq 100 --config "SM90=1 BLOCK_M=192 BLOCK_N=128"
  contains "too few registers for 128 keys a step at this head dim; use BLOCK_N=64, or BLOCK_M=128"
  expect 2 "$kjit" run flash_attention2 --batch 2 --heads 8 --seq 100 --head-dim 96 --config "SM90=1 BLOCK_M=128 BLOCK_N=128"
  contains "head_dim 64 or 128 (the sm80 tiles take head_dim 96)"
  expect 2 "$kjit" run flash_attention2 --batch 2 --heads 8 --seq 100 --cin 3
  contains "not a conv layer's options"
  expect 2 "$kjit" run conv2d_bn_silu --batch 1 --cin 8 --cout 8 --hw 4 4 --causal
  contains "are flash_attention2's"
  shapes_error '{"layers": [{"batch": 4294967297, "cin": 8, "cout": 8, "hw": [4, 4]}]}' "fits 32 bits"
  shapes_error '{"layers": [{"batch": 1, "cin": 8, "cout": 8, "hw": [4, 4], "pad": -1}]}' "layer 1: pad = -1"
  expect 2 "$kjit" frobnicate
  contains "unknown subcommand 'frobnicate' of kjit: use one of warm, check, ptx,"
  # An empty cache directory is an error, not the default; reading commands create nothing.
  expect 2 "$kjit" cache ls --cache-dir ""
  contains "--cache-dir is empty"
  expect 2 env KJIT_CACHE_DIR= "$kjit" warm --arch sm_90 --kernel axpby
  contains "KJIT_CACHE_DIR is set but empty"
  for verb in stats ls verify; do
    expect 2 "$kjit" cache $verb --cache-dir "$dir/nowhere"
    contains "there is no kernel cache at $dir/nowhere/kjit.sqlite3"
  done
  expect 2 "$kjit" cache export "$dir/out.sqlite3" --cache-dir "$dir/nowhere"
  expect 0 "$kjit" warm --arch sm_90 --kernel axpby --cache-dir "$dir/exp"
  expect 2 "$kjit" cache export "$dir/no/such/dir/out.sqlite3" --cache-dir "$dir/exp"
  contains "cannot write $dir/no/such/dir/out.sqlite3: $dir/no/such/dir is not a directory"
  # A layer or configuration run and tune cannot take is said before a GPU is asked for.
  expect 2 "$kjit" run conv2d_bn_silu --batch 1 --cin 8 --cout 8 --hw 4 4 --config FOO=1 --cache-dir "$dir"
  contains "configuration key FOO is not one of the conv kernels': they are written"
  expect 2 "$kjit" run conv2d_bn_silu --batch 1 --cin 8 --cout 8 --hw 4 4 --config PLANES=2 --cache-dir "$dir"
  contains "lacks BLOCK_H: this kernel's are written BLOCK_H BLOCK_W PLANES THREADS [STEP_ROWS] [STAGED]"
  for sub in run tune; do
    expect 2 "$kjit" $sub conv2d_bn_silu --batch 100000 --cin 100000 --cout 8 --hw 1000 1000 --cache-dir "$dir"
    contains "GB of host memory; this machine has"
  done
  # Removing from no cache: nothing to do (exit 0), and none made.
  expect 0 "$kjit" cache clear --cache-dir "$dir/nowhere"
  contains "there is no kernel cache at $dir/nowhere/kjit.sqlite3: nothing to remove"
  expect 0 "$kjit" cache prune --max-size 1M --cache-dir "$dir/nowhere"
  contains "nothing to remove"
  [[ -e $dir/nowhere || -e $dir/out.sqlite3 ]] && fail "a command created $dir/nowhere or an export"
  expect 2 "$kjit" cache frobnicate
  contains "unknown subcommand 'frobnicate' of kjit cache: use one of stats,"
  expect 2 env KJIT_KERNELS_DIR="$dir/no-such-dir" "$kjit" ptx axpby -D T=f32 -D BLOCK=256 -D ITEMS=4 --arch sm_90 \
    --cache-dir "$dir"
  contains "KJIT_KERNELS_DIR=$dir/no-such-dir is not a directory"
  expect 2 "$kjit" run conv2d_bn_silu --batch 1 --cin 8 --cout 8 --hw 4 4 --config NHWC=1 BLOCK_M=64 BLOCK_N=32 STAGES=8
  contains "add --channels-last"
  shapes_error '{"layers": [{"batch": 1, "cin": 8}]}' "--shapes"
  shapes_error '{"layers": [{"batch": 1, "cin": 8, "cout": 8, "hw": [4, 4], "kernel": [3, 3]}]}' \
    'layer 1: unknown key "kernel": the keys are batch, cin, cout, hw, kernel_size'
  shapes_error '{"layers": [{"batch": 1, "cin": 8, "cout": 8, "hw": [4, 4]}], "layer": []}' 'unknown key "layer"'
  shapes_error 'not json' "parse error"
  if ! command -v cuobjdump >/dev/null && ! command -v nvdisasm >/dev/null && [[ ! -x /usr/local/cuda/bin/cuobjdump ]] &&
     [[ ! -x /usr/local/cuda/bin/nvdisasm ]]; then
    expect 2 "$kjit" ptx axpby -D T=f32 -D BLOCK=256 -D ITEMS=4 --arch sm_90 --sass --cache-dir "$dir"
    contains "SASS needs cuobjdump or nvdisasm"
  fi
  ;;
no-gpu)  # run and tune need a GPU; without one they say so and exit 2
  if [[ -e /dev/nvidia0 ]]; then echo "a GPU is present: the no-GPU path is not reachable here"; exit 0; fi
  expect 2 "$kjit" run conv2d_bn_silu --batch 1 --cin 64 --cout 64 --hw 56 56 --cache-dir "$dir"
  contains "kjit run needs a GPU"
  expect 2 "$kjit" tune conv2d_bn_silu --batch 1 --cin 64 --cout 64 --hw 56 56 --cache-dir "$dir"
  contains "kjit tune needs a GPU"
  expect 2 "$kjit" run conv2d_bn_silu --batch 1 --cin 64 --cout 64 --hw 56 56 --channels-last --cache-dir "$dir"
  contains "kjit run needs a GPU"
  expect 2 "$kjit" run flash_attention2 --batch 2 --heads 16 --kv-heads 4 --seq 1000 --causal --cache-dir "$dir"
  contains "kjit run needs a GPU"
  expect 2 "$kjit" tune flash_attention2 --batch 2 --heads 16 --seq 1000 --head-dim 64 --cache-dir "$dir"
  contains "kjit tune needs a GPU"
  expect 2 "$kjit" warm --cache-dir "$dir"
  contains "pass --arch"
  expect 2 "$kjit" check conv2d_bn_silu --cache-dir "$dir"
  contains "kjit check needs a GPU"
  expect 2 "$kjit" check maxpool2d --batch 2 --cin 3 --hw 9 9 --kernel-size 3 3 --stride 2 --pad 1 --cache-dir "$dir"
  contains "kjit check needs a GPU"
  expect 2 "$kjit" check flash_attention2 --cache-dir "$dir"
  contains "kjit check needs a GPU"
  expect 2 "$kjit" check flash_attention2_forward_sm90 --batch 1 --heads 2 --seq 100 --head-dim 64 --cache-dir "$dir"
  contains "kjit check needs a GPU"
  # model run checks the graph and the weights first (cli.sh model); when they are sound, the GPU.
  small_graph >"$dir/graph.json"
  "$helper" weights "$dir/graph.json" 2 "$dir/w.safetensors" || fail "could not write weights"
  expect 2 "$kjit" model run "$dir/graph.json" --weights "$dir/w.safetensors" --batch 2 --cache-dir "$dir"
  contains "kjit model run needs a GPU"
  expect 2 "$kjit" model tune "$dir/graph.json" --batch 1 8 32 --cache-dir "$dir"
  contains "kjit model tune needs a GPU"
  echo '{"inputs": []}' >"$dir/bad.json"
  expect 2 "$kjit" model tune "$dir/bad.json" --batch 1 --cache-dir "$dir"  # the graph first, then the GPU
  contains "the graph: \"inputs\" must be a non-empty list"
  ;;
warm-graph)  # kjit warm --graph: exactly the kernels a model runs, and its layers' tuned winners' while they hold
  small_graph >"$dir/graph.json"
  expect 0 "$kjit" warm --graph "$dir/graph.json" --batch 1 4 --arch sm_90 --arch sm_80 --cache-dir "$dir/c" -j 2
  contains "5 compiled, 0 already cached, 0 failed"
  contains "conv2d_bn_silu_gemm_tma_forward__f32__"  # the 1x1 head on a 9.0 device
  contains "add__f32__256                                      sm_90"
  # On sm_80 the head's epilogue adds the stem (a fused add): no add kernel is warmed there.
  grep -qE "add__f32__256 +sm_80" <<<"$out" && fail "a fused add's kernel was warmed: $out"
  # A winner stored for the stem (any device of the arch): its kernel joins; one whose source changed does not.
  "$helper" winner "$dir/c" "$dir/graph.json" 4 stem "BLOCK_M=128 BLOCK_N=32 BLOCK_K=32 GROUP_M=8 SPLIT_K=1" ||
    fail "could not store a winner"
  "$helper" sql "$dir/c/kjit.sqlite3" "INSERT INTO tuned_winners SELECT kernel, shape, device, arch, '1.0',
    'edited', 'BLOCK_M=64 BLOCK_N=16 BLOCK_K=16 GROUP_M=8 SPLIT_K=1', 1.0, created_at FROM tuned_winners" ||
    fail "could not store a stale winner"
  expect 0 "$kjit" warm --graph "$dir/graph.json" --batch 1 4 --arch sm_90 --cache-dir "$dir/c" -j 2
  contains "1 compiled, 3 already cached, 0 failed"
  contains "conv2d_bn_silu_forward__f32__128__32__32__8"
  grep -q "conv2d_bn_silu_forward__f32__64__16__16__8" <<<"$out" && fail "a stale winner's kernel was warmed: $out"
  # An attention node's winner too (whichever tiles: here the sm80 mainloop's on a 9.0 device).
  attention=$(dirname "$0")/../examples/attention/gqa_causal.json
  "$helper" winner "$dir/c" "$attention" 1 attn "BLOCK_M=64 BLOCK_N=64" || fail "could not store an attention winner"
  expect 0 "$kjit" warm --graph "$attention" --batch 1 --arch sm_90 --cache-dir "$dir/c" -j 2
  contains "4 compiled, 0 already cached, 0 failed"
  contains "flash_attention2_forward__bf16__f32__bf16__64__64__128__true"
  contains "flash_attention2_forward_sm90__bf16__"
  expect 2 "$kjit" warm --graph "$dir/graph.json" --kernel axpby --arch sm_90 --cache-dir "$dir/c"
  contains "give one of them"
  ;;
keygen)  # a signing key pair for the remote tier: the secret 0600, the public line printed, nothing overwritten
  expect 0 "$kjit" keygen fleet-1 --dir "$dir"
  [[ $(stat -c %a "$dir/fleet-1.secret") == 600 ]] || fail "the secret key is not mode 0600"
  [[ $(head -1 <<<"$out") == "$(cat "$dir/fleet-1.public")" ]] || fail "the printed line is not the public key: $out"
  grep -qE '^fleet-1:[A-Za-z0-9+/]{43}=$' "$dir/fleet-1.public" || fail "not a NAME:BASE64 public key"
  secret=$(cat "$dir/fleet-1.secret")
  expect 2 "$kjit" keygen fleet-1 --dir "$dir"
  contains "it exists (kjit keygen never overwrites a key)"
  [[ $(cat "$dir/fleet-1.secret") == "$secret" ]] || fail "the secret key changed"
  expect 2 "$kjit" keygen "fleet 2" --dir "$dir"
  contains "'fleet 2' is no key name"
  ;;
remote)  # the fleet tier through the binary, against a redis-server this case starts (and kills by pid)
  redis-server --port 0 --unixsocket "$dir/redis.sock" --unixsocketperm 700 --save "" --appendonly no \
    --dir "$dir" >"$dir/redis.log" 2>&1 &
  redis_pid=$!
  stop_redis() { { kill -9 $redis_pid && wait $redis_pid; } 2>/dev/null; }
  trap 'stop_redis; rm -rf "$dir"' EXIT
  for _ in $(seq 100); do [[ -S "$dir/redis.sock" ]] && break; sleep 0.05; done
  [[ -S "$dir/redis.sock" ]] || fail "redis-server did not start: $(cat "$dir/redis.log")"
  mkdir "$dir/keys"
  expect 0 "$kjit" keygen fleet-1 --dir "$dir/keys"
  work=(warm --arch sm_90 --kernel axpby --kernel add --kernel maxpool2d --kernel upsample_nearest2d)
  expect 0 "$kjit" "${work[@]}" --cache-dir "$dir/alone"
  total=$(grep -oE '^[0-9]+ compiled' <<<"$out" | cut -d' ' -f1)
  (( total > 4 )) || fail "too little work to shard: $out"
  writer=(env KJIT_REMOTE="unix://$dir/redis.sock" KJIT_REMOTE_MODE=read-write KJIT_SIGNING_KEY="$dir/keys/fleet-1.secret")
  reader=(env KJIT_REMOTE="unix://$dir/redis.sock" KJIT_TRUSTED_KEYS="$dir/keys/fleet-1.public")
  # Two build boxes warm their halves at once; each compiles and publishes only its own.
  "${writer[@]}" "$kjit" "${work[@]}" --shard 1/2 --cache-dir "$dir/box1" >"$dir/box1.out" 2>&1 &
  box1=$!
  "${writer[@]}" "$kjit" "${work[@]}" --shard 2/2 --cache-dir "$dir/box2" >"$dir/box2.out" 2>&1 ||
    fail "shard 2/2: $(cat "$dir/box2.out")"
  wait $box1 || fail "shard 1/2: $(cat "$dir/box1.out")"
  c1=$(grep -oE '^[0-9]+ compiled' "$dir/box1.out" | cut -d' ' -f1)
  c2=$(grep -oE '^[0-9]+ compiled' "$dir/box2.out" | cut -d' ' -f1)
  (( c1 > 0 && c2 > 0 && c1 + c2 == total )) || fail "shards compiled $c1 + $c2, not $total"
  grep -qF "published $c1 to unix://$dir/redis.sock (read-write, signing as fleet-1)" "$dir/box1.out" ||
    fail "shard 1/2 did not say what it published: $(cat "$dir/box1.out")"
  # A GPU server with an empty cache compiles nothing, and keeps what it fetched.
  expect 0 "${reader[@]}" "$kjit" "${work[@]}" --cache-dir "$dir/server"
  contains "0 compiled, $total from the remote, 0 already cached, 0 failed"
  expect 0 "${reader[@]}" "$kjit" cache stats --cache-dir "$dir/server"
  contains "remote unix://$dir/redis.sock (read-only, trusting 1 keys): $total hits, 0 misses, 0 errors"
  expect 0 "$kjit" cache stats --cache-dir "$dir/server" --json
  contains "\"hits\": $total"
  expect 0 "$kjit" "${work[@]}" --cache-dir "$dir/server"
  contains "0 compiled, $total already cached"
  # Two boxes warming everything at once compile each kernel once between them.
  "${writer[@]}" "$kjit" "${work[@]}" --cache-dir "$dir/box3" >"$dir/box3.out" 2>&1 &
  box3=$!
  "${writer[@]}" "$kjit" "${work[@]}" --cache-dir "$dir/box4" >"$dir/box4.out" 2>&1 || fail "$(cat "$dir/box4.out")"
  wait $box3 || fail "$(cat "$dir/box3.out")"
  grep -qE "^0 compiled, $total from the remote" "$dir/box3.out" || fail "box 3 compiled: $(cat "$dir/box3.out")"
  grep -qE "^0 compiled, $total from the remote" "$dir/box4.out" || fail "box 4 compiled: $(cat "$dir/box4.out")"
  # push and pull: a cache made before the fleet goes up, another machine takes it whole.
  expect 0 "$kjit" warm --arch sm_80 --kernel axpby --cache-dir "$dir/old"
  old=$(grep -oE '^[0-9]+ compiled' <<<"$out" | cut -d' ' -f1)
  expect 0 "${writer[@]}" "$kjit" cache push --cache-dir "$dir/old"
  contains "pushed $old entries and 0 tuned winners to unix://$dir/redis.sock"
  expect 0 "${reader[@]}" "$kjit" cache pull --cache-dir "$dir/new"
  contains "pulled $((old + total)) entries and 0 tuned winners from unix://$dir/redis.sock (read-only, trusting 1 keys) (0 already here)"
  expect 0 "${reader[@]}" "$kjit" cache pull --cache-dir "$dir/new" --json
  contains '"entries": 0'
  expect 2 "${reader[@]}" "$kjit" cache push --cache-dir "$dir/new"
  contains "is read-only here: set KJIT_REMOTE_MODE=read-write"
  # Wrong settings are usage errors that say what to set; a server that is not there is a warning.
  expect 2 "$kjit" cache pull --cache-dir "$dir/new"
  contains "no remote cache to pull from: set KJIT_REMOTE"
  expect 2 "$kjit" "${work[@]}" --shard 3/2 --cache-dir "$dir/new"
  contains "--shard 3/2: write I/N with 1 <= I <= N"
  expect 2 env KJIT_REMOTE=redis:/typo "$kjit" "${work[@]}" --cache-dir "$dir/new"
  contains "remote cache address 'redis:/typo'"
  expect 2 env KJIT_REMOTE="unix://$dir/redis.sock" "$kjit" "${work[@]}" --cache-dir "$dir/new"
  contains "set KJIT_TRUSTED_KEYS"
  stop_redis
  expect 0 "${reader[@]}" "$kjit" "${work[@]}" --arch sm_87 --cache-dir "$dir/new"
  contains "working without it"
  contains "0 failed"
  expect 1 "${writer[@]}" "$kjit" warm --arch sm_86 --kernel axpby --cache-dir "$dir/new"
  contains "reached the remote cache"
  ;;
model)  # a graph planned and its weights checked without a GPU; model run finds their errors before asking for one
  small_graph >"$dir/graph.json"
  expect 0 "$kjit" model plan "$dir/graph.json" --batch 4 --arch sm_90
  contains "batch 4, planned for sm_90 (H100 SXM / H200: 132 SMs, 232448 B of shared memory a block; no GPU asked): 3 nodes, 6 parameter slots, 3 launches and copies"
  contains "stem                     conv2d_bn_silu     [4,16,16,16]         <- x"
  contains "    params  weight[16,3,3,3] bn_scale[16] bn_shift[16]"
  contains "    launch  conv2d_bn_silu_"
  contains "    launch  add__f32__256 grid"
  contains "weights: not checked"
  yolo=$(dirname "$0")/../examples/yolov8n/yolov8n.json  # zero-copy concat, fused adds, chained pools: 80 -> 44
  expect 0 "$kjit" model plan "$yolo" --batch 1 --arch sm_90
  contains "61 nodes, 123 parameter slots, 44 launches and copies"
  contains "    writes  into b2.c2f.cat channels 0..15"
  contains "    adds    b2.c2f.cv1b in its epilogue"
  contains "    no launch: node 'b2.c2f.m0.cv2' adds it in its epilogue"
  contains "    writes  b9.sppf.pool1, b9.sppf.pool2 too, in the same launch"
  contains "    launch  maxpool2d_chain__f32__256__4096 grid 64x1x1 block 256"
  contains "    no launch: node 'b9.sppf.pool0' writes it in its launch"
  expect 2 "$kjit" model run "$yolo" --batch 1  # before asking for a GPU
  contains "the graph has 123 weight slots (b0.stem.weight, b0.stem.bn_scale, b0.stem.bn_shift, …): give --weights FILE"
  expect 0 "$kjit" model plan "$yolo" --batch 1 --arch sm_90 --no-chained-ops
  contains "46 launches and copies"
  expect 0 "$kjit" model plan "$yolo" --batch 1 --arch sm_90 --no-zero-copy-concat --no-fused-add --no-chained-ops
  contains "80 launches and copies"
  contains "    copy    b2.c2f.cv1a: zero-copy concat is off"
  expect 0 "$kjit" model plan "$yolo" --batch 16 --arch sm_90 --json
  contains '"launches": 44'
  contains '"written_into": {'
  contains '"residual": "b2.c2f.cv1b"'
  contains '"chained": ['
  contains '"made_by": "b9.sppf.pool0"'
  # Typed values: casts around attention, 16-bit values shown with their type, dispatch per arch.
  attention=$(dirname "$0")/../examples/attention/gqa_causal.json
  expect 0 "$kjit" model plan "$attention" --batch 2 --arch sm_90
  contains "5 nodes, 1 parameter slots, 5 launches and copies"
  contains "attn                     attention          [2,512,32,128] bf16  <- q16,k16,v16"
  contains "    params  lse[2,32,512]"
  contains "    launch  flash_attention2_forward_sm90__bf16__"
  contains "    launch  cast__bf16__f32__"
  expect 0 "$kjit" model plan "$attention" --batch 2 --arch sm_80 --json
  contains '"dtype": "bf16"'
  contains '"kernel": "flash_attention2_forward__bf16__'
  sed '/"q16"/s/"to": "bf16"/"to": "f16"/' "$attention" >"$dir/mixed.json"
  expect 2 "$kjit" model plan "$dir/mixed.json" --arch sm_90
  contains "input 'k16' is bf16, the op reads f16: put a cast node before it"
  "$helper" weights "$dir/graph.json" 4 "$dir/w.safetensors" || fail "could not write weights"
  expect 0 "$kjit" model plan "$dir/graph.json" --batch 4 --arch sm_80 --weights "$dir/w.safetensors"
  contains "planned for sm_80 (A100: 108 SMs"
  contains "every slot fits (6 filled, 0 BatchNorms folded)"
  expect 0 "$kjit" model plan "$dir/graph.json" --batch 4 --arch sm_90 --weights "$dir/w.safetensors" --json
  contains '"slots_filled": 6'
  contains '"kernel": "add__f32__256"'
  expect 2 "$kjit" model plan "$dir/graph.json" --batch 4 --arch sm_75
  contains "no part of sm_75 is known to plan for: give --sms and --max-shared-bytes"
  expect 0 "$kjit" model plan "$dir/graph.json" --batch 4 --arch sm_75 --sms 40 --max-shared-bytes 65536
  contains "planned for sm_75 (40 SMs, 65536 B"
  # Weights that do not fit, for plan and for run: every missing key and mismatch named.
  "$helper" weights "$dir/graph.json" 4 "$dir/short.safetensors" head.bn_shift || fail "could not write weights"
  printf 'garbage' >"$dir/garbage.safetensors"
  for sub in "plan --arch sm_90" run; do
    # shellcheck disable=SC2086
    expect 2 "$kjit" model $sub "$dir/graph.json" --batch 4 --weights "$dir/short.safetensors"
    contains "missing: head.bn_shift"
    # shellcheck disable=SC2086
    expect 2 "$kjit" model $sub "$dir/graph.json" --batch 4 --weights "$dir/garbage.safetensors"
    contains "garbage.safetensors: "
  done
  # Graphs that cannot be planned: the node and the fault, not "needs a GPU".
  echo '{"inputs": [{"name": "x", "shape": ["B", 4, 8, 8]}], "outputs": ["p"],
         "nodes": [{"name": "p", "op": "add", "inputs": ["x", "q"]}, {"name": "q", "op": "add", "inputs": ["x", "p"]}]}' \
    >"$dir/cycle.json"
  expect 2 "$kjit" model run "$dir/cycle.json" --weights "$dir/w.safetensors"
  contains "cycle through the nodes p, q"
  expect 2 "$kjit" model plan "$dir/cycle.json" --arch sm_90
  contains "cycle through the nodes p, q"
  sed 's/"add"/"softmax"/' "$dir/graph.json" >"$dir/unknown.json"
  expect 2 "$kjit" model run "$dir/unknown.json" --weights "$dir/w.safetensors"
  contains "unknown op 'softmax'"
  expect 2 "$kjit" model plan "$dir/graph.json" --batch 2000000000 --arch sm_90
  contains "node 'stem': "
  head -c 40 "$dir/graph.json" >"$dir/truncated.json"
  expect 2 "$kjit" model plan "$dir/truncated.json" --arch sm_90
  expect 2 "$kjit" model run "$dir/truncated.json" --weights "$dir/w.safetensors"
  [[ $out != *"needs a GPU"* ]] || fail "a truncated graph asked for a GPU: $out"
  ;;
*) fail "unknown case" ;;
esac
echo "ok: $case_name"
