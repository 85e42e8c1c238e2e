#!/usr/bin/env bash
# Every libFuzzer target at once, one process each, from prebuilt binaries
# (for a machine with a core per target and no Rust toolchain).
#
#   scripts/fuzz/run_all.sh OUT SECONDS
#
# Each target runs for SECONDS in all with -rss_limit_mb=2048 -timeout=10
# (restarted after a finding until its time is spent) on a scratch copy of
# its seeds, the committed regressions read as extra seeds. Where to find
# things (defaults: a `cargo fuzz build` in this checkout):
#   FUZZ_BIN_DIR      the target binaries (fuzz/target/x86_64-unknown-linux-gnu/release)
#   FUZZ_CORPUS       the seed folders, one per target (fuzz/corpus)
#   FUZZ_REGRESSIONS  inputs that once failed, one folder per target (fuzz/regressions)
#   FUZZ_TARGETS      the targets, space-separated (every binary named after fuzz/fuzz_targets/*.rs)
#   FUZZ_EVERY        one `every` binary instead, run with KOPT_FUZZ_TARGET=<target>
# OUT gets summary.txt (one line per target: seconds, executions, corpus
# size, peak RSS, result), fuzz-results.tar.gz (the summary, each
# target's log tails and the inputs of its findings) and corpus.tar.gz
# (each target's corpus as the run left it, <target>/<input>: unpack it and
# pass its folder as FUZZ_CORPUS to resume a run where this one stopped;
# split into corpus.tar.gz.00, .01, ... past FUZZ_PART_MB MiB, default 15).
# Exit status: 0 when no target found anything, 1 otherwise, 2 on misuse.
set -uo pipefail

if [ $# -ne 2 ] || ! [ "$2" -gt 0 ] 2>/dev/null; then
  sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
out=$1
secs=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
bin_dir=${FUZZ_BIN_DIR:-$root/fuzz/target/x86_64-unknown-linux-gnu/release}
corpus=${FUZZ_CORPUS:-$root/fuzz/corpus}
regressions=${FUZZ_REGRESSIONS:-$root/fuzz/regressions}
if [ -n "${FUZZ_TARGETS:-}" ]; then
  read -r -a targets <<<"$FUZZ_TARGETS"
else
  targets=()
  for f in "$root"/fuzz/fuzz_targets/*.rs; do
    [ "$(basename "$f")" = every.rs ] || targets+=("$(basename "$f" .rs)")
  done
fi
# FUZZ_EVERY: the `every` binary, which runs the target KOPT_FUZZ_TARGET
# names (one file to carry instead of one per target).
bin_of() { echo "${FUZZ_EVERY:-$bin_dir/$1}"; }
for t in "${targets[@]}"; do
  [ -x "$(bin_of "$t")" ] || { echo "run_all.sh: no fuzz binary $(bin_of "$t")" >&2; exit 2; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/kopt-fuzz-all.XXXXXX")
now() { date +%s; }

# One target: runs until its SECONDS are spent, restarting after a finding;
# writes its summary line to $work/$t/line.
run_target() {
  local t=$1 dir=$work/$1 start left runs=0 execs=0 rss=0 n r crashes=0 timeouts=0 ooms=0 leaks=0
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp "$corpus/$t"/* "$dir/corpus/" 2>/dev/null || true
  local seeds=("$dir/corpus")
  [ -d "$regressions/$t" ] && seeds+=("$regressions/$t")
  start=$(now)
  while :; do
    left=$((secs - ($(now) - start)))
    [ "$left" -gt 0 ] || break
    runs=$((runs + 1))
    KOPT_FUZZ_TARGET=$t RUST_BACKTRACE=1 "$(bin_of "$t")" "${seeds[@]}" -max_total_time="$left" \
      -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$dir/artifacts/" >"$dir/run$runs.log" 2>&1
    n=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$dir/run$runs.log" | tail -1 | awk '{print $2}')
    [ -n "$n" ] || n=$(grep -o '^#[0-9]*' "$dir/run$runs.log" | tr -d '#' | sort -n | tail -1)
    execs=$((execs + ${n:-0}))
    r=$(grep -o 'stat::peak_rss_mb: *[0-9]*' "$dir/run$runs.log" | tail -1 | awk '{print $2}')
    [ "${r:-0}" -gt "$rss" ] && rss=$r
    # A finding ends the run with its input written; none means the time ran out.
    local found
    found=$(grep -o 'Test unit written to [^ ]*' "$dir/run$runs.log" | awk '{print $NF}' | xargs -r -n1 basename)
    [ -n "$found" ] || break
    for a in $found; do
      case $a in
        timeout-*) timeouts=$((timeouts + 1)) ;;
        oom-*) ooms=$((ooms + 1)) ;;
        leak-*) leaks=$((leaks + 1)) ;;
        *) crashes=$((crashes + 1)) ;;
      esac
    done
  done
  local result=ok
  [ $((crashes + timeouts + ooms + leaks)) -eq 0 ] ||
    result="crash=$crashes timeout=$timeouts oom=$ooms leak=$leaks"
  printf '%-15s %5s %12s %7s %8s %4s  %s\n' "$t" "$(($(now) - start))" "$execs" \
    "$(find "$dir/corpus" -type f | wc -l)" "$rss" "$runs" "$result" >"$dir/line"
}

echo "== ${#targets[@]} targets, ${secs} s each, in parallel ($(nproc) cores)"
pids=()
for t in "${targets[@]}"; do
  run_target "$t" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done

summary=$out/summary.txt
{
  echo "libFuzzer, ${#targets[@]} targets in parallel, ${secs} s each, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores"
  echo "flags: -rss_limit_mb=2048 -timeout=10 -max_total_time=<seconds left>, restarted after a finding"
  printf '%-15s %5s %12s %7s %8s %4s  %s\n' target secs execs corpus peak_mb runs result
  for t in "${targets[@]}"; do
    cat "$work/$t/line" 2>/dev/null || echo "$t: no summary (the runner died)"
  done
} >"$summary"

# The findings' inputs and the end of each log (the panic, libFuzzer's stats).
pack=$work/pack
mkdir -p "$pack"
cp "$summary" "$pack/"
for t in "${targets[@]}"; do
  mkdir -p "$pack/$t"
  cp "$work/$t/artifacts/"* "$pack/$t/" 2>/dev/null || true
  for log in "$work/$t"/run*.log; do
    [ -f "$log" ] && tail -n 150 "$log" >"$pack/$t/$(basename "$log")"
  done
done
tar -czf "$out/fuzz-results.tar.gz" -C "$pack" .
# The grown corpora, to resume from.
grown=$work/grown
mkdir -p "$grown"
for t in "${targets[@]}"; do
  [ -d "$work/$t/corpus" ] && cp -r "$work/$t/corpus" "$grown/$t"
done
tar -czf "$out/corpus.tar.gz" -C "$grown" .
# In parts of at most FUZZ_PART_MB MiB (default 15) where it is larger, for
# a transfer that limits each file: `cat corpus.tar.gz.* | tar xz` joins them.
part_mb=${FUZZ_PART_MB:-15}
if [ "$(stat -c %s "$out/corpus.tar.gz")" -gt $((part_mb * 1048576)) ]; then
  split -b "${part_mb}M" -d "$out/corpus.tar.gz" "$out/corpus.tar.gz." &&
    rm "$out/corpus.tar.gz"
fi
cat "$summary"
rm -rf "$work"
# Exit 1 when any target's line (after the 4 heading lines) is not "ok".
if tail -n +5 "$summary" | grep -qv '  ok$'; then exit 1; fi
exit 0
