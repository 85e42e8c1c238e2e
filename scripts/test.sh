#!/usr/bin/env bash
# All of kopt's tests, Rust and Python, on a machine without a GPU:
# cargo's tests, then the wheel built and installed into a virtual
# environment (.venv-test) and the Python package's tests run with pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace
venv=${KOPT_TEST_VENV:-.venv-test}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check 'maturin>=1.9.4,<2' 'pytest>=7'
# The MCP Python SDK, the client of `kopt mcp`'s end-to-end test; optional.
"$venv/bin/pip" install --quiet --disable-pip-version-check 'mcp>=2.3,<3' ||
  echo "mcp could not be installed: the MCP client's test is skipped"
# Ray for kopt.tune(executor="ray")'s test (a local instance); optional.
"$venv/bin/pip" install --quiet --disable-pip-version-check 'ray>=2' ||
  echo "ray could not be installed: the Ray executor's test is skipped"
PATH="$PWD/$venv/bin:$PATH" wheel=$(scripts/build_wheel.sh target/wheels)
"$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$wheel"
KOPT_BIN="$(realpath "${CARGO_TARGET_DIR:-target}")/debug/kopt" PATH="$PWD/$venv/bin:$PATH" "$venv/bin/python" -m pytest -q crates/kopt-py/tests
