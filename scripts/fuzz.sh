#!/usr/bin/env bash
# Coverage-guided fuzzing of rlx-onnx under libFuzzer (the targets are in
# fuzz/fuzz_targets, their bodies in fuzz/src/lib.rs). Builds the targets with
# sanitizer coverage, debug assertions and overflow checks (an integer
# overflow panics: a finding), then runs each for SECONDS:
#
#     scripts/fuzz.sh [--jobs N] [--bin DIR] [SECONDS] [TARGET...]
#
# (default: 60 s, every target, one process each). --jobs N runs N libFuzzer
# processes per target on one shared corpus (their logs in
# .cache/fuzz/TARGET/jobs); --bin DIR takes built targets from DIR instead of
# building them (the lent GPU machine has no Rust toolchain: build here,
# carry the binaries, run there).
#
# Each target's working corpus grows in .cache/fuzz/TARGET/corpus (seeded from
# fuzz/corpus/TARGET); crashes land in .cache/fuzz/TARGET/crashes, and once
# fixed belong in fuzz/regressions/TARGET (tests/corpus.rs replays them).
# Every run appends its execution count to fuzz/runs.log.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=1
bin=
while [[ $# -gt 0 ]]; do
  case $1 in
    --jobs) jobs=$2; shift 2 ;;
    --bin) bin=$(realpath "$2"); shift 2 ;;
    *) break ;;
  esac
done
secs=${1:-60}
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(import ir_text artifact tensor_files structured gpu_plans text_ops)
if [[ -z $bin ]]; then
host=$(rustc -vV | sed -n 's/^host: //p')
# With --target, RUSTFLAGS reach only the fuzzed code, not build scripts.
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
  -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
  -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
export CARGO_INCREMENTAL=0
cargo build --release -p rlx-fuzz --features libfuzzer --bins --target "$host" --target-dir target/fuzz
bin=$PWD/target/fuzz/$host/release
fi
status=0
for t in "${targets[@]}"; do
  work=$PWD/.cache/fuzz/$t
  mkdir -p "$work/corpus" "$work/crashes"
  echo "== $t: $secs s, $jobs process(es)"
  args=("$work/corpus" "$PWD/fuzz/corpus/$t" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=20
    -max_len=65536 -artifact_prefix="$work/crashes/" -print_final_stats=1)
  set +e
  if [[ $jobs -gt 1 ]]; then
    # Each job a process of its own, all until the time is up; libFuzzer
    # writes job K's log to fuzz-K.log in the working directory.
    rm -rf "$work/jobs" && mkdir -p "$work/jobs"
    (cd "$work/jobs" && "$bin/$t" "${args[@]}" -jobs="$jobs" \
      -workers="$jobs" > main.log 2>&1)
    rc=$?
    cat "$work"/jobs/fuzz-*.log > "$work/last.log"
  else
    "$bin/$t" "${args[@]}" > "$work/last.log" 2>&1
    rc=$?
  fi
  set -e
  if [[ $rc -eq 0 && -n $(ls -A "$work/crashes") ]]; then
    rc=1
  fi
  execs=$(awk '/stat::number_of_executed_units/ {n += $NF} END {print n + 0}' "$work/last.log")
  tail -4 "$work/last.log"
  echo "$(date -u +%FT%TZ) $t ${secs}s jobs=$jobs execs=${execs:-0} exit=$rc" | tee -a fuzz/runs.log
  if [[ $rc -ne 0 ]]; then
    echo "$t: a finding (exit $rc), input in $work/crashes/"
    status=1
  fi
done
awk '{for (i = 3; i <= NF; i++) if ($i ~ /^execs=/) {split($i, e, "="); n[$2] += e[2]}} END {for (t in n) printf "total %-13s %d executions\n", t, n[t]}' fuzz/runs.log
exit $status
