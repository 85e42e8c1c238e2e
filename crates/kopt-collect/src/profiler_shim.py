# Written by kopt into its run folder and put first on PYTHONPATH for the
# workload it runs (kopt-collect/src/profiler_shim.rs says when).
#
# kopt runs the program without a profiler of its own: `kopt trace` records
# with CUPTI itself (only one CUPTI client traces at a time), and a bare run
# must record nothing. So the program's torch.profiler.profile becomes a
# stand-in that records nothing and marks each step the profiler would have
# recorded, and every step after it, as an NVTX range named as torch names
# it (ProfilerStep#N). kopt times those ranges.
import os
import sys


def _install():
    import importlib.abc
    import importlib.util

    note = os.environ.get("KOPT_PROFILER_SHIM_NOTE")

    def first_recorded(schedule):
        """The first step the schedule records (None: it records none)."""
        if schedule is None:
            return 0
        for n in range(100000):
            try:
                action = schedule(n)
            except Exception:
                return 0
            if getattr(action, "name", "") in ("RECORD", "RECORD_AND_SAVE"):
                return n
        return None

    class _Nothing:
        """What the stand-in's reports return: empty, printable."""

        def __iter__(self):
            return iter(())

        def __len__(self):
            return 0

        def table(self, *args, **kwargs):
            return "(torch.profiler was replaced by kopt's step markers: no events)"

        def __getattr__(self, name):
            return lambda *args, **kwargs: _Nothing()

        def __str__(self):
            return self.table()

    class profile:
        """torch.profiler.profile replaced by kopt: records nothing, marks steps."""

        def __init__(self, *args, schedule=None, on_trace_ready=None, **kwargs):
            self.step_num = 0
            self._first = first_recorded(schedule)
            self._open = False
            if note:
                try:
                    with open(note, "a"):
                        pass
                except OSError:
                    pass

        def _mark(self):
            if self._first is not None and self.step_num >= self._first:
                import torch

                torch.cuda.nvtx.range_push("ProfilerStep#%d" % self.step_num)
                self._open = True

        def _close(self):
            if self._open:
                import torch

                torch.cuda.nvtx.range_pop()
                self._open = False

        def start(self):
            self._mark()

        def stop(self):
            self._close()

        def step(self):
            self._close()
            self.step_num += 1
            self._mark()

        def __enter__(self):
            self.start()
            return self

        def __exit__(self, *exc):
            self.stop()

        def key_averages(self, *args, **kwargs):
            return _Nothing()

        def events(self):
            return _Nothing()

        def __getattr__(self, name):
            # export_chrome_trace, export_stacks, add_metadata, ...: nothing to do.
            if name.startswith("__"):
                raise AttributeError(name)
            return lambda *args, **kwargs: None

    def patch(module):
        module.profile = profile
        inner = sys.modules.get("torch.profiler.profiler")
        if inner is not None:
            inner.profile = profile

    class Loader(importlib.abc.Loader):
        def __init__(self, real):
            self.real = real

        def create_module(self, spec):
            return self.real.create_module(spec)

        def exec_module(self, module):
            self.real.exec_module(module)
            patch(module)

        def __getattr__(self, name):
            # get_source, is_package, ...: the real loader's.
            return getattr(self.real, name)

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "torch.profiler":
                return None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = Loader(spec.loader)
                    return spec
            return None

    if "torch.profiler" in sys.modules:
        patch(sys.modules["torch.profiler"])
    else:
        sys.meta_path.insert(0, Finder())


def _chain():
    """Run the sitecustomize this file shadows, if there is one."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        folder = os.path.abspath(entry or ".")
        if folder == here:
            continue
        candidate = os.path.join(folder, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_kopt_shadowed_sitecustomize", candidate)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return


try:
    _install()
except Exception as e:  # never stop the workload over a stand-in
    sys.stderr.write("kopt: torch.profiler stand-in not installed: %s\n" % e)
_chain()
