# Written by kopt into its run folder and put first on PYTHONPATH for the
# workload it runs (kopt-collect/src/profiler_shim.rs says when).
#
# kopt runs the program without a profiler of its own: `kopt trace` records
# with CUPTI itself (only one CUPTI client traces at a time), and a bare run
# must record nothing. So the program's torch.profiler.profile becomes a
# stand-in that records nothing and, as torch does when given a schedule,
# marks steps as NVTX ranges named ProfilerStep#N: from the first step the
# schedule records, every step while the profiler runs. kopt times those
# ranges. The legacy torch.autograd.profiler.profile is left alone.
import os
import sys

_MARK = "_kopt_profiler_stand_in"


def _install():
    import importlib.abc

    note = os.environ.get("KOPT_PROFILER_SHIM_NOTE")

    class _Nothing(float):
        """What the stand-in's reports return: zero, empty, printable, and
        any attribute of it the same (totals read as 0)."""

        def __new__(cls):
            return float.__new__(cls, 0.0)

        def __iter__(self):
            return iter(())

        def __len__(self):
            return 0

        def __getitem__(self, key):
            raise IndexError("torch.profiler was replaced by kopt's step markers: no events")

        def __call__(self, *args, **kwargs):
            return _Nothing()

        def table(self, *args, **kwargs):
            return "(torch.profiler was replaced by kopt's step markers: no events)"

        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return _Nothing()

    def recording(schedule, step):
        try:
            action = schedule(step)
        except Exception:
            return True
        return getattr(action, "name", "") in ("RECORD", "RECORD_AND_SAVE")

    class profile:
        """torch.profiler.profile replaced by kopt: records nothing, marks steps."""

        def __init__(self, *args, schedule=None, on_trace_ready=None, **kwargs):
            self.step_num = 0
            self._schedule = schedule
            # torch names steps only when given a schedule; so does this.
            self._marking = False
            self._running = False
            self._range = None
            if note:
                try:
                    with open(note, "a"):
                        pass
                except OSError:
                    pass

        def _mark(self):
            self._close()
            if not self._running or self._schedule is None:
                return
            # The schedule is asked once a step, as torch asks it.
            if not self._marking and recording(self._schedule, self.step_num):
                self._marking = True
            if self._marking:
                import torch

                # start/end pair by id: a user's own push/pop ranges around
                # or inside a step stay whole.
                self._range = torch.cuda.nvtx.range_start("ProfilerStep#%d" % self.step_num)

        def _close(self):
            if self._range is not None:
                import torch

                torch.cuda.nvtx.range_end(self._range)
                self._range = None

        def start(self):
            self._running = True
            self._mark()

        def stop(self):
            self._running = False
            self._close()

        def step(self):
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

        def export_chrome_trace(self, path):
            # A program may read its trace back: an empty one, not none.
            with open(path, "w") as f:
                f.write('{"traceEvents": []}\n')

        def export_stacks(self, path, *args, **kwargs):
            open(path, "w").close()

        def __getattr__(self, name):
            # add_metadata, export_memory_timeline, profiler, ...: nothing.
            if name.startswith("__"):
                raise AttributeError(name)
            return _Nothing()

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
                # Another kopt's stand-in (kopt run by a workload kopt runs) too.
                if getattr(finder, _MARK, False) or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = Loader(spec.loader)
                    return spec
            return None

    setattr(Finder, _MARK, True)
    if "torch.profiler" in sys.modules:
        patch(sys.modules["torch.profiler"])
        return None
    return Finder()


def _chain():
    """Run the sitecustomize this file shadows, if there is one (not
    another kopt stand-in)."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        folder = os.path.abspath(entry or ".")
        if folder == here or os.path.basename(folder) == "python-shim":
            continue
        candidate = os.path.join(folder, "sitecustomize.py")
        if os.path.isfile(candidate):
            name = "_kopt_shadowed_sitecustomize"
            spec = importlib.util.spec_from_file_location(name, candidate)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            return


_finder = None
try:
    _finder = _install()
except Exception as e:  # never stop the workload over a stand-in
    sys.stderr.write("kopt: torch.profiler stand-in not installed: %s\n" % e)
_chain()
# First in line even if the shadowed sitecustomize put a finder of its own there.
if _finder is not None and not any(getattr(f, _MARK, False) for f in sys.meta_path):
    sys.meta_path.insert(0, _finder)
