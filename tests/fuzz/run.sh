#!/usr/bin/env bash
# Runs every fuzz target for a fixed time: tests/fuzz/run.sh BUILD_DIR SECONDS.
# The seed corpus in tests/fuzz/corpus/<name>/ is read only; new inputs go to
# tests/fuzz/corpus-<name>/ (ignored by git). Crash inputs are written to BUILD_DIR/fuzz-artifacts/.
# A run longer than 30 s on one input counts as a hang (the simulator on a sanitized build
# takes up to a few seconds for the largest steps the harness simulates).
# Prints one table row per target: name, inputs executed, crashes; fails when any target crashed.
set -uo pipefail
build=${1:?build dir}
seconds=${2:-60}
here="$(cd "$(dirname "$0")" && pwd)"
art="$build/fuzz-artifacts"
mkdir -p "$art"
status=0
printf '%-14s %12s %8s\n' target execs crashes
for name in scenario layout hf_config measurements profile trace trace_fit import_megatron import_torchtitan import_nemo; do
  work="$here/corpus-$name"
  mkdir -p "$work"
  log="$art/$name.log"
  dict=""
  [ -f "$here/dict/$name.dict" ] && dict="-dict=$here/dict/$name.dict"
  # The importers' real launcher files (tests/data/configs/) are seeds too, read in place.
  extra=""
  case "$name" in
    import_megatron) extra="$here/../data/configs/megatron" ;;
    import_torchtitan) extra="$here/../data/configs/torchtitan" ;;
    import_nemo) extra="$here/../data/configs/nemo" ;;
  esac
  "$build/tests/fuzz/fuzz_$name" "$work" "$here/corpus/$name" $extra \
    -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -max_len=8192 \
    -artifact_prefix="$art/$name-" -print_final_stats=1 $dict >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  crashes=0
  [ "$rc" -ne 0 ] && crashes=1
  printf '%-14s %12s %8s\n' "$name" "${execs:-?}" "$crashes"
  if [ "$rc" -ne 0 ]; then
    status=1
    grep -E 'ERROR|SUMMARY|invariant|terminate|what\(\)' "$log" | head -5
  fi
done
exit $status
