#!/usr/bin/env bash
# Coverage-guided fuzzing of rlx-onnx under libFuzzer (the targets are in
# fuzz/fuzz_targets, their bodies in fuzz/src/lib.rs). Builds the targets with
# sanitizer coverage, debug assertions and overflow checks (an integer
# overflow panics: a finding), then runs each for SECONDS:
#
#     scripts/fuzz.sh [SECONDS] [TARGET...]     (default: 60 s, every target)
#
# Each target's working corpus grows in .cache/fuzz/TARGET/corpus (seeded from
# fuzz/corpus/TARGET); crashes land in .cache/fuzz/TARGET/crashes, and once
# fixed belong in fuzz/regressions/TARGET (tests/corpus.rs replays them).
# Every run appends its execution count to fuzz/runs.log.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(import ir_text artifact tensor_files structured)
host=$(rustc -vV | sed -n 's/^host: //p')
# With --target, RUSTFLAGS reach only the fuzzed code, not build scripts.
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
  -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
  -Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
export CARGO_INCREMENTAL=0
cargo build --release -p rlx-fuzz --features libfuzzer --bins --target "$host" --target-dir target/fuzz
status=0
for t in "${targets[@]}"; do
  work=.cache/fuzz/$t
  mkdir -p "$work/corpus" "$work/crashes"
  echo "== $t: $secs s"
  set +e
  "target/fuzz/$host/release/$t" "$work/corpus" "fuzz/corpus/$t" -max_total_time="$secs" \
    -rss_limit_mb=2048 -timeout=20 -max_len=65536 -artifact_prefix="$work/crashes/" \
    -print_final_stats=1 > "$work/last.log" 2>&1
  rc=$?
  set -e
  execs=$(awk '/stat::number_of_executed_units/ {print $NF}' "$work/last.log")
  tail -4 "$work/last.log"
  echo "$(date -u +%FT%TZ) $t ${secs}s execs=${execs:-0} exit=$rc" | tee -a fuzz/runs.log
  if [[ $rc -ne 0 ]]; then
    echo "$t: a finding (exit $rc), input in $work/crashes/"
    status=1
  fi
done
awk '{split($4, e, "="); n[$2] += e[2]} END {for (t in n) printf "total %-13s %d executions\n", t, n[t]}' fuzz/runs.log
exit $status
