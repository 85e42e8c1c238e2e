#!/usr/bin/env bash
# Device call: [wheel check,] then 13 libFuzzer targets in parallel for SECS each.
#   .gpu-hard/call.sh OUT SECS CORPUS_TGZ WHEEL(yes|no)
set -u
OUT=$1; SECS=$2; CORPUS=$3; WHEEL=$4
H=.gpu-hard
{ date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch,sys;print('torch',torch.__version__,'python',sys.version.split()[0])"
  echo "cores $(nproc)"; grep -m1 'model name' /proc/cpuinfo; } > $OUT/card.txt 2>&1
cat $OUT/card.txt
if [ "$WHEEL" = yes ]; then
  W=$OUT/wheel.txt
  python3 -m venv --system-site-packages /tmp/kv >$W 2>&1
  if ! /tmp/kv/bin/python -c 'import torch' 2>/dev/null; then
    # python3 here is itself a venv: --system-site-packages reaches its base, not torch's venv.
    sp=$(python3 -c 'import torch,os;print(os.path.dirname(os.path.dirname(torch.__file__)))')
    /tmp/kv/bin/python -c 'import site;print(site.getsitepackages()[0])' | xargs -I{} sh -c "echo $sp > {}/torch-venv.pth"
    echo "note: torch not visible through --system-site-packages; added $sp by a .pth" >>$W
  fi
  /tmp/kv/bin/python -m pip install --no-index --no-deps $H/wheels/kopt-*.whl >>$W 2>&1
  /tmp/kv/bin/python -m pip show -f kopt | grep -E 'Version|tracer|_kopt' >>$W 2>&1
  timeout 100 env PYTHONUNBUFFERED=1 /tmp/kv/bin/python $H/wheel_check.py /tmp/wc >>$W 2>&1
  echo "rc=$?" >>$W
  cp /tmp/wc/analysis.json $OUT/ 2>/dev/null
  cat $W
fi
mkdir -p /tmp/seeds && tar xzf $CORPUS -C /tmp/seeds
mkdir -p $H/bins && { tar xJf $H/bins.tar.xz -C $H/bins || python3 -c "import tarfile;tarfile.open('$H/bins.tar.xz').extractall('$H/bins')"; } && chmod +x $H/bins/*
mkdir -p $OUT/fuzz
FUZZ_BIN_DIR=$H/bins FUZZ_CORPUS=/tmp/seeds FUZZ_REGRESSIONS=fuzz/regressions \
  FUZZ_TARGETS="$(ls $H/bins | tr "\n" " ")" bash $H/run_all.sh $OUT/fuzz $SECS
echo "run_all rc=$?"
ls -la $OUT/fuzz
