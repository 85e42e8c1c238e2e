#!/usr/bin/env bash
# Long fuzzing run: every target for SECONDS_PER_TARGET seconds.
#
#   scripts/fuzz/run.sh SECONDS_PER_TARGET OUT_DIR [TARGET...]
#
# With cargo-fuzz (libFuzzer; the stable toolchain works with
# RUSTC_BOOTSTRAP=1) each target runs with -timeout=5 -rss_limit_mb=2048
# -malloc_limit_mb=2048, restarted after each crash until its time is spent,
# on a copy of its seed corpus (the committed one is never written). Without
# cargo-fuzz (or with FUZZ_ENGINE=stable) the stable driver (crates/kopt-fuzz,
# release build with overflow checks and debug assertions) runs instead, with
# a random seed.
#
# OUT_DIR/summary.txt gets one line per target: executions, seconds,
# crashes, timeouts, out-of-memory, peak RSS; then each distinct panic with
# an input that causes it. OUT_DIR/<target>/ keeps the logs and inputs.
# Exit status: 0 when nothing was found, 1 otherwise.
set -uo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
secs=$1
out=$2
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$root"

if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for f in fuzz/fuzz_targets/*.rs; do
    targets+=("$(basename "$f" .rs)")
  done
fi

engine=${FUZZ_ENGINE:-}
if [ -z "$engine" ]; then
  if cargo fuzz --version >/dev/null 2>&1; then
    engine=libfuzzer
  else
    engine=stable
  fi
fi
if [ "$engine" = libfuzzer ]; then
  echo "== building the libFuzzer targets (cargo fuzz build; log: $out/build.log)"
  if ! (cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz build >"$out/build.log" 2>&1); then
    echo "cargo fuzz build failed (see $out/build.log): falling back to the stable driver"
    engine=stable
  fi
fi

summary=$out/summary.txt
panics=$out/panics.txt
: >"$panics"
now() { date +%s; }

if [ "$engine" = libfuzzer ]; then
  bin_dir=fuzz/target/x86_64-unknown-linux-gnu/release
  {
    echo "engine: libFuzzer ($(cargo fuzz --version 2>/dev/null), $(rustc --version)), ${secs} s per target, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "flags: -timeout=5 -rss_limit_mb=2048 -malloc_limit_mb=2048, restarted after each crash"
    printf '%-14s %6s %12s %8s %9s %5s %12s\n' target secs execs crashes timeouts ooms peak_rss_mb
  } >"$summary"
  for t in "${targets[@]}"; do
    work=$out/$t
    mkdir -p "$work/corpus" "$work/artifacts"
    cp -n fuzz/corpus/"$t"/* "$work/corpus/" 2>/dev/null || true
    start=$(now)
    execs=0 crashes=0 timeouts=0 ooms=0 rss=0 runs=0
    echo "== $t: ${secs} s"
    while :; do
      left=$((secs - ($(now) - start)))
      [ "$left" -gt 0 ] || break
      runs=$((runs + 1))
      log=$work/run$runs.log
      RUST_BACKTRACE=1 "$bin_dir/$t" "$work/corpus" \
        -max_total_time="$left" -timeout=5 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$work/artifacts/" >"$log" 2>&1
      n=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | awk '{print $2}')
      if [ -z "$n" ]; then
        n=$(grep -o '^#[0-9]*' "$log" | tr -d '#' | sort -n | tail -1)
      fi
      execs=$((execs + ${n:-0}))
      r=$(grep -o 'stat::peak_rss_mb: [0-9]*' "$log" | tail -1 | awk '{print $2}')
      r2=$(grep -o 'rss: [0-9]*Mb' "$log" | tr -dc '0-9\n' | sort -n | tail -1)
      for v in ${r:-0} ${r2:-0}; do [ "$v" -gt "$rss" ] && rss=$v; done
      # The finding's input (libFuzzer names it by its hash: a repeat overwrites).
      new=$(grep -o 'Test unit written to [^ ]*' "$log" | awk '{print $NF}' | xargs -r -n1 basename)
      [ -n "$new" ] || break # ran out its time without a finding
      for a in $new; do
        case $a in
          crash-*) crashes=$((crashes + 1)) ;;
          timeout-*) timeouts=$((timeouts + 1)) ;;
          oom-*) ooms=$((ooms + 1)) ;;
          *) crashes=$((crashes + 1)) ;;
        esac
        what=$(grep -m1 -A1 "panicked at" "$log" | tr '\n' ' ' |
          sed -E "s/thread '[^']*'( \([0-9]+\))? panicked at/panicked at/; s#[^ ]*/(crates/kopt)#\1#g; s/ +$//")
        [ -n "$what" ] || what=$(grep -m1 -E 'ERROR: libFuzzer|ALARM|out-of-memory|malloc\(' "$log")
        case $what in
          *"/rustc/"*) # inside the standard library: name the kopt frame that called it
            what=$(echo "$what" | sed -E 's#/rustc/[0-9a-f]+/##')
            caller=$(grep -m1 -E 'at .*crates/kopt-(ingest|analyze|report|model|bench)/' "$log" | sed -E 's#.*(crates/kopt)#\1#')
            [ -z "$caller" ] || what="$what (called from $caller)"
            ;;
        esac
        echo "$t	$what	$work/artifacts/$a" >>"$panics"
      done
    done
    printf '%-14s %6s %12s %8s %9s %5s %12s\n' "$t" "$(($(now) - start))" "$execs" "$crashes" "$timeouts" "$ooms" "$rss" >>"$summary"
  done
else
  # Release with overflow checks and debug assertions (as cargo-fuzz builds),
  # in a folder of its own so the ordinary release build is not redone.
  tdir=${CARGO_TARGET_DIR:-$root/target}/fuzz-stable
  echo "== building the stable driver ($tdir)"
  CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true \
    cargo build --quiet --release -p kopt-fuzz --target-dir "$tdir" || exit 2
  bin=$tdir/release/kopt-fuzz
  {
    echo "engine: stable driver (crates/kopt-fuzz; $(rustc --version)), ${secs} s per target, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "limits: 5 s per input, heap growth <= max(10x input, 64 MiB) and <= 2 GiB"
    printf '%-14s %6s %12s %8s %9s %5s %12s\n' target secs execs crashes timeouts ooms peak_rss_mb
  } >"$summary"
  for t in "${targets[@]}"; do
    work=$out/$t
    mkdir -p "$work"
    echo "== $t: ${secs} s"
    start=$(now)
    "$bin" run --secs "$secs" --seed "${KOPT_FUZZ_SEED:-random}" --out "$work" "$t" >"$work/stable.log" 2>&1
    line=$(grep -m1 "^$t: " "$work/stable.log")
    execs=$(echo "$line" | sed -n 's/^[^:]*: \([0-9]*\) execs.*/\1/p')
    rss=$(echo "$line" | sed -n 's/.*process peak RSS \([0-9]*\) MiB.*/\1/p')
    crashes=$(grep -c '^  PANIC in' "$work/stable.log")
    timeouts=$(grep -c '^  TIMEOUT in' "$work/stable.log")
    ooms=$(grep -c '^  MEMORY in' "$work/stable.log")
    if grep -q 'still running after' "$work/stable.log"; then
      timeouts=$((timeouts + 1))
    fi
    grep -A1 -E '^  (PANIC|TIMEOUT|MEMORY) in' "$work/stable.log" | grep -v '^--' | paste - - |
      sed "s/^  [A-Z]* in [a-z_]* ([^)]*): /$t\t/; s/ *input: /\t/" >>"$panics"
    printf '%-14s %6s %12s %8s %9s %5s %12s\n' "$t" "$(($(now) - start))" "${execs:-0}" "$crashes" "$timeouts" "$ooms" "${rss:-?}" >>"$summary"
  done
fi

{
  echo
  echo "findings (target, what, input):"
  if [ -s "$panics" ]; then
    sort -t '	' -k1,2 -u "$panics" | sed 's/^/  /'
  else
    echo "  none"
  fi
} >>"$summary"
cat "$summary"
[ -s "$panics" ] && exit 1
exit 0
