"""The in-process gate's harness (``Harness``, ``TorchBackend``,
``CallFailed``).

Its source lives with kopt's other Python harnesses, in kopt-collect's
``python/kopt_gate_harness.py``, and is built into the native module:
``kopt bench --script`` writes the same text beside the module scripts it
runs, and this module runs it here, so the two cannot drift apart.
"""

from ._kopt import gate_harness_source as _gate_harness_source

exec(compile(_gate_harness_source(), "kopt_gate_harness.py", "exec"))
