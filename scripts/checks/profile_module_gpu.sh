#!/usr/bin/env bash
# GPU check of the Python package: the wheel built here (scripts/build_wheel.sh,
# carried as target/wheels) installs offline, and profile_module profiles a
# seed-000-like MoE routing module. Usage: scripts/checks/profile_module_gpu.sh OUT_DIR
set -euo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
wheel=$(ls -1 target/wheels/kopt-*.whl | tail -n 1)
# torch comes from the machine's python3 (itself a virtual environment);
# kopt from the wheel, installed with no index into a folder of its own.
site=$(mktemp -d)/site
python3 -m pip install --quiet --no-index --no-deps --target "$site" "$wheel" 2>&1 | tee "$out/pip.log"
export PYTHONPATH=$site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/card.txt"
python3 -c "import kopt, sys; print('kopt', kopt.__version__, 'python', sys.version.split()[0])" | tee "$out/versions.txt"
"$site/bin/kopt" --version | tee -a "$out/versions.txt"
cd "$out"
PYTHONUNBUFFERED=1 python3 "$here/profile_module_moe.py" "$PWD" 2>&1 | tee "$out/profile_module.txt"
# The run folder and the history as one file (the device tool brings back few files).
tar czf run.tgz runs history.db && rm -rf runs history.db
