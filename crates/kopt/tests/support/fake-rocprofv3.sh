#!/bin/sh
# A fake `rocprofv3` for kopt's tests (no AMD GPU in CI). It checks its
# arguments the way kopt must pass them, runs the workload, then writes CSV
# shaped like real rocprofv3 output:
#   --kernel-trace: NAME_kernel_trace.csv (a copy of FAKE_ROC_TRACE, a real
#     rocprofv3 kernel trace), NAME_agent_info.csv (FAKE_ROC_AGENT) and
#     NAME_hip_api_trace.csv (one hipLaunchKernel per dispatch, made up);
#   --pmc C...: NAME_counter_collection.csv with the columns of a real
#     rocprofv3 counter collection, one row per counter per dispatch of
#     FAKE_ROC_TRACE whose kernel matches --kernel-include-regex; every value
#     is 4096 (GRBM_GUI_ACTIVE 100000).
#   FAKE_ROC_MODE: "" | nokernels (write nothing) | badflag (reject the flags)
#   FAKE_ROC_ARGS_LOG: each run's pass kind, counters and workload argv appended
if [ "$1" = "--version" ]; then
  echo "rocprofv3 1.0.0 (fake for tests)"
  exit 0
fi
fail() { echo "rocprofv3: error: $1" >&2; exit 2; }
fmt=""; dir=""; name=""; trace=0; hip=0; pmc=""; regex=""; seen_regex=0
while [ $# -gt 0 ]; do
  case "$1" in
    --output-format) fmt="$2"; shift 2 ;;
    -d) dir="$2"; shift 2 ;;
    -o) name="$2"; shift 2 ;;
    --kernel-trace) trace=1; shift ;;
    --hip-runtime-trace) hip=1; shift ;;
    --kernel-include-regex) regex="$2"; seen_regex=1; shift 2 ;;
    --pmc)
      shift
      while [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; do pmc="$pmc $1"; shift; done
      ;;
    --) shift; break ;;
    *) fail "unrecognized arguments: $1" ;;
  esac
done
[ "$FAKE_ROC_MODE" = badflag ] && fail "unrecognized arguments: --kernel-trace"
[ "$fmt" = csv ] || fail "kopt must ask for --output-format csv (got '$fmt')"
[ -n "$dir" ] && [ -d "$dir" ] || fail "-d must name an existing folder (got '$dir')"
[ -n "$name" ] || fail "-o NAME missing"
[ $# -gt 0 ] || fail "no application after --"
if [ $trace = 1 ] && [ -n "$pmc" ]; then fail "one pass is a trace or counters, not both"; fi
if [ $trace = 0 ] && [ -z "$pmc" ]; then fail "neither --kernel-trace nor --pmc"; fi
if [ -n "$pmc" ] && [ $seen_regex = 0 ]; then fail "counter pass without --kernel-include-regex"; fi
if [ $trace = 1 ] && [ $hip = 0 ]; then fail "kernel trace without --hip-runtime-trace"; fi
if [ -n "$FAKE_ROC_ARGS_LOG" ]; then
  if [ $trace = 1 ]; then echo "trace $*" >> "$FAKE_ROC_ARGS_LOG"; else echo "pmc$pmc | $regex | $*" >> "$FAKE_ROC_ARGS_LOG"; fi
fi
"$@"
rc=$?
[ $rc -ne 0 ] && exit $rc
[ "$FAKE_ROC_MODE" = nokernels ] && exit 0
cp "$FAKE_ROC_AGENT" "$dir/${name}_agent_info.csv" || exit 1
if [ $trace = 1 ]; then
  cp "$FAKE_ROC_TRACE" "$dir/${name}_kernel_trace.csv" || exit 1
  # --hip-runtime-trace: one hipLaunchKernel per dispatch (its correlation
  # id), from 3 us to 1 us before the kernel starts.
  api="$dir/${name}_hip_api_trace.csv"
  echo '"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"' > "$api"
  tail -n +2 "$FAKE_ROC_TRACE" | while IFS= read -r line; do
    set -- $(printf '%s' "$line" | sed -E 's/^.*",//' | tr ',' ' ')
    echo "\"HIP_RUNTIME_API\",\"hipLaunchKernel\",4242,4242,$1,$(($2 - 3000)),$(($2 - 1000))" >> "$api"
  done
  exit 0
fi
out="$dir/${name}_counter_collection.csv"
echo '"Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Process_Id","Thread_Id","Grid_Size","Kernel_Id","Kernel_Name","Workgroup_Size","LDS_Block_Size","Scratch_Size","VGPR_Count","Accum_VGPR_Count","SGPR_Count","Counter_Name","Counter_Value","Start_Timestamp","End_Timestamp"' > "$out"
# Trace rows: 7 plain fields, the quoted kernel name, then plain fields.
tail -n +2 "$FAKE_ROC_TRACE" | while IFS= read -r line; do
  kname=$(printf '%s' "$line" | sed -E 's/^([^,]*,){7}"([^"]*)".*/\2/')
  printf '%s' "$kname" | grep -Eq -- "$regex" || continue
  head7=$(printf '%s' "$line" | cut -d, -f1-7)
  rest=$(printf '%s' "$line" | sed -E 's/^.*",//')
  agent=$(printf '%s' "$head7" | cut -d, -f2); queue=$(printf '%s' "$head7" | cut -d, -f3)
  tid=$(printf '%s' "$head7" | cut -d, -f5); disp=$(printf '%s' "$head7" | cut -d, -f6)
  kid=$(printf '%s' "$head7" | cut -d, -f7)
  set -- $(printf '%s' "$rest" | tr ',' ' ')
  corr=$1; start=$2; end=$3; lds=$4; scr=$5; vgpr=$6; acc=$7; sgpr=$8; wgx=$9
  shift 9; wg=$((wgx * $1 * $2)); grid=$(($3 * $4 * $5))
  for c in $pmc; do
    v=4096; [ "$c" = GRBM_GUI_ACTIVE ] && v=100000
    echo "$corr,$disp,$agent,$queue,$tid,$tid,$grid,$kid,\"$kname\",$wg,$lds,$scr,$vgpr,$acc,$sgpr,\"$c\",$v.000000,$start,$end" >> "$out"
  done
done
exit 0
