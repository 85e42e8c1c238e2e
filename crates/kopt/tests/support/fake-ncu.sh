#!/bin/sh
# A fake `ncu` for kopt's tests (no GPU in CI). It runs the workload as ncu
# would, then "records" a report that names the fixture CSV its export prints.
#   FAKE_NCU_MODE: "" | perm | nokernels
#   FAKE_PASS1 / FAKE_PASS2 / FAKE_PASS3: CSV fixtures the export prints per pass
#   FAKE_NCU_ARGS_LOG: every capture's mode and workload argv is appended here
if [ "$1" = "--version" ]; then
  echo "NVIDIA (R) Nsight Compute Command Line Profiler"
  echo "Version 2025.3.1.0 (fake for tests)"
  exit 0
fi
if [ "$1" = "-i" ]; then
  /bin/cat "$(/bin/cat "$2")"
  exit $?
fi
out=""; logfile=""; mode=timing
while [ $# -gt 0 ]; do
  case "$1" in
    -f|--csv) shift ;;
    -o) out="$2"; shift 2 ;;
    --log-file) logfile="$2"; shift 2 ;;
    --set) mode=deep; shift 2 ;;
    --filter-mode) [ "$mode" = timing ] && mode=targeted; shift 2 ;;
    --metrics|--kernel-name-base|--kernel-name|--launch-count|--page|--print-units|--cache-control|--clock-control) shift 2 ;;
    *) break ;;
  esac
done
# With --log-file, ncu's own lines go to that file, not to the terminal.
say() { if [ -n "$logfile" ]; then echo "$1" >> "$logfile"; else echo "$1"; fi; }
[ -n "$FAKE_NCU_ARGS_LOG" ] && echo "$mode $*" >> "$FAKE_NCU_ARGS_LOG"
if [ "$FAKE_NCU_MODE" = perm ]; then
  say "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the target device 0."
  exit 1
fi
say "==PROF== Connected to process $$"
"$@"
rc=$?
say "==PROF== Disconnected from process $$"
if [ $rc -ne 0 ]; then
  say "==ERROR== The application returned an error code ($rc)."
  exit $rc
fi
if [ "$FAKE_NCU_MODE" = nokernels ]; then
  say "==WARNING== No kernels were profiled."
  exit 0
fi
case $mode in
  timing) src=$FAKE_PASS1 ;;
  targeted) src=$FAKE_PASS2 ;;
  deep) src=$FAKE_PASS3 ;;
esac
if [ -n "$logfile" ]; then
  /bin/cat "$src" >> "$logfile"
else
  echo "$src" > "$out.ncu-rep"
fi
