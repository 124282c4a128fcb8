#!/usr/bin/env bash
# ON THE LENT MACHINE (carry gpu-fuzz/ made by scripts/gpu-fuzz-pack.sh): runs
# each target for SECONDS with JOBS libFuzzer processes (TARGET:N gives one
# target N instead), all targets at once,
# through scripts/fuzz.sh. Their runs.log lines, logs and any crash inputs
# go to $OUT (add the lines to fuzz/runs.log here; a crash input belongs in
# fuzz/regressions once fixed).
#   bash scripts/gpu-fuzz.sh SECONDS JOBS [TARGET[:N]...]
set -uo pipefail
cd "$(dirname "$0")/.."
secs=$1 jobs=$2
shift 2
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(import structured)
out=${OUT:-/tmp/rlx-fuzz-out}; mkdir -p "$out"
bin=/tmp/rlx-fuzz-bin; mkdir -p "$bin"
before=$(wc -l < fuzz/runs.log)
names=()
for spec in "${targets[@]}"; do
  t=${spec%%:*} n=$jobs
  [[ $spec == *:* ]] && n=${spec##*:}
  names+=("$t")
  xz -dc "gpu-fuzz/$t.xz" > "$bin/$t" && chmod +x "$bin/$t"
  mkdir -p ".cache/fuzz/$t" && tar xJf "gpu-fuzz/$t-corpus.tar.xz" -C ".cache/fuzz/$t"
  bash scripts/fuzz.sh --bin "$bin" --jobs "$n" "$secs" "$t" > "$out/$t.txt" 2>&1 &
done
wait
targets=("${names[@]}")
tail -n +"$((before + 1))" fuzz/runs.log | tee "$out/runs.log"
# Crash inputs in one archive per target (a call returns only so many files).
for t in "${targets[@]}"; do
  tar cJf "$out/$t-crashes.tar.xz" -C ".cache/fuzz/$t" crashes
  grep -h -A3 "panicked" ".cache/fuzz/$t"/jobs/fuzz-*.log 2>/dev/null | grep -v "^--" | sort | uniq -c | sort -rn | head -20 > "$out/$t-panics.txt"
  echo "$t: $(ls ".cache/fuzz/$t/crashes" | wc -l) crash input(s); corpus $(ls ".cache/fuzz/$t/corpus" | wc -l) files"
  cat "$out/$t-panics.txt"
done
