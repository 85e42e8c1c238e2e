"""The in-process gate's harness: times two callables in one process and
collects the facts kopt's decision reads (``kopt_bench::gate``).

It decides nothing: every rule (KEEP / MARGINAL / REVERT, each SUSPECT
reason) lives in Rust, so the facts written here are plain numbers and
flags. It imports nothing from kopt, so the engine can run it beside module
scripts in an interpreter that has torch but not kopt
(``kopt bench --script A.py --candidate-script B.py``).

The protocol, per shape:

- checked calls on fresh inputs (new random values, same shapes), the
  candidate first (so no reference result for these inputs exists yet),
  output buffers (``out=``) and the allocator's free blocks poisoned with a
  marked NaN before it; half before the timing, half after;
- an empty call's timed window (the floor);
- warm-up, then rounds of both callables in random order, each call
  between a device-wide synchronisation and events (start; on the caller's
  stream as it returns; after synchronising the whole device) inside a host
  clock; the inputs' values refreshed in place before every call (a cache
  keyed on the input's address goes stale) and some timed calls checked;
- with ``flush_l2``, the same rounds again with a buffer larger than L2
  written before each call.

Every torch call goes through a backend object, so the protocol runs in
tests on a fake device with a fake clock.
"""

from __future__ import annotations

import json
import random
import sys
import time

_perf_counter = time.perf_counter

#: Marked NaNs by element size: a computed NaN never carries these payloads.
POISON = {
    "f64": 0x7FF8DEAD0000DEAD,
    "f32": 0x7FC0DEAD,
    "f16": 0x7E5B,
    "bf16": 0x7FD7,
}
#: Low mantissa bits a narrower float lacks (f32/f64: fp16's 10 bits; 16-bit: fp8's 3).
LOW_BITS = {"f64": 52 - 10, "f32": 23 - 10, "f16": 10 - 3, "bf16": 7 - 3}


class TorchBackend:
    """The real device: torch.cuda, with its timing and synchronisation
    functions captured before any candidate runs."""

    #: Attributes a candidate could replace to fool a timer.
    WATCHED = (
        ("torch.cuda", "synchronize"),
        ("torch.cuda", "Event"),
        ("torch.cuda.Event", "record"),
        ("torch.cuda.Event", "elapsed_time"),
        ("torch.cuda.Event", "synchronize"),
        ("torch.cuda", "current_stream"),
        ("time", "perf_counter"),
    )

    def __init__(self, torch=None):
        if torch is None:
            import torch  # noqa: F811
        self.torch = torch
        if not torch.cuda.is_available():
            raise RuntimeError("the in-process gate needs a CUDA device (torch.cuda.is_available() is False)")
        self.device = torch.device("cuda", torch.cuda.current_device())
        self._sync = torch.cuda.synchronize
        self._Event = torch.cuda.Event
        self._record = torch.cuda.Event.record
        self._elapsed = torch.cuda.Event.elapsed_time
        self._esync = torch.cuda.Event.synchronize
        props = torch.cuda.get_device_properties(self.device)
        self.name = props.name
        self.l2 = int(getattr(props, "L2_cache_size", 0) or 0) or 50 * 2**20
        self._flush = None
        self._int = {
            torch.float64: torch.int64,
            torch.float32: torch.int32,
            torch.float16: torch.int16,
            torch.bfloat16: torch.int16,
        }
        self._names = {
            torch.float64: "f64",
            torch.float32: "f32",
            torch.float16: "f16",
            torch.bfloat16: "bf16",
            torch.int64: "i64",
            torch.int32: "i32",
            torch.int16: "i16",
            torch.int8: "i8",
            torch.uint8: "u8",
            torch.bool: "bool",
        }
        for n in ("float8_e4m3fn", "float8_e5m2"):
            if hasattr(torch, n):
                self._names[getattr(torch, n)] = "f8" + n.split("_")[1]

    # -- clocks and synchronisation -------------------------------------
    def sync(self):
        self._sync(self.device)

    def now(self):
        return _perf_counter()

    def event(self):
        return self._Event(enable_timing=True)

    def record(self, e):
        self._record(e)

    def elapsed(self, a, b):
        self._esync(b)
        return self._elapsed(a, b) / 1e3

    def seed(self, n):
        self.torch.manual_seed(n)

    def ranges(self):
        """Whether kopt's tracer records this process (it reads the NVTX
        ranges around timed calls: kernels per call, work launched outside)."""
        import os

        return bool(os.environ.get("KOPT_TRACE_OUT"))

    def range_push(self, name):
        self.torch.cuda.nvtx.range_push(name)

    def range_pop(self):
        self.torch.cuda.nvtx.range_pop()

    def probe_kernel(self):
        """One tiny kernel, launched as a candidate's would be."""
        if getattr(self, "_probe", None) is None:
            self._probe = self.torch.zeros(1, device=self.device)
        self._probe.add_(1.0)

    def flush_l2(self):
        if self._flush is None:
            self._flush = self.torch.empty(2 * self.l2 // 4 + 1, dtype=self.torch.float32, device=self.device)
        self._flush.fill_(1.0)

    def watched(self):
        """The watched attributes as they are now, and the global settings
        that change another callable's precision or speed."""
        import importlib

        out = {}
        for mod, attr in self.WATCHED:
            if mod == "torch.cuda.Event":
                obj = self.torch.cuda.Event
            else:
                obj = importlib.import_module(mod)
            out[f"{mod}.{attr}"] = getattr(obj, attr, None)
        t = self.torch
        for name, get in (
            ("torch.backends.cuda.matmul.allow_tf32", lambda: t.backends.cuda.matmul.allow_tf32),
            ("torch.backends.cudnn.allow_tf32", lambda: t.backends.cudnn.allow_tf32),
            ("torch.backends.cudnn.benchmark", lambda: t.backends.cudnn.benchmark),
            ("torch.get_float32_matmul_precision()", t.get_float32_matmul_precision),
            (
                "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
                lambda: t.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
            ),
            (
                "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
                lambda: t.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
            ),
        ):
            try:
                out[name] = get()
            except Exception:
                pass
        return out

    def foreign(self, watched):
        """Watched attributes already replaced (by an import) before the gate started."""
        bad = []
        for name, f in watched.items():
            if not callable(f):
                continue
            m = getattr(f, "__module__", None) or ""
            if name == "time.perf_counter":
                if f is not _perf_counter and m != "time":
                    bad.append(name)
            elif not (m.startswith("torch") or m == "builtins" or m == ""):
                bad.append(name)
        return bad

    # -- tensors -----------------------------------------------------------
    def is_tensor(self, x):
        return isinstance(x, self.torch.Tensor)

    def layout(self, t):
        return tuple(t.shape), t.dtype

    def shuffle(self, t):
        """Permute a float tensor's values in place (same values, new places)."""
        if t.is_floating_point() and t.numel() > 1 and t.is_contiguous():
            flat = t.view(-1)
            flat.copy_(flat[self.torch.randperm(flat.numel(), device=flat.device)])

    def leaves(self, obj):
        """The tensors in a result or an input list (nested lists, tuples, dicts)."""
        if self.is_tensor(obj):
            return [obj]
        if isinstance(obj, dict):
            obj = list(obj.values())
        if isinstance(obj, (list, tuple)):
            out = []
            for o in obj:
                out.extend(self.leaves(o))
            return out
        return []

    def dtype(self, t):
        return self._names.get(t.dtype, str(t.dtype).replace("torch.", ""))

    def nbytes(self, t):
        return t.numel() * t.element_size()

    def widen(self, t):
        """A float64 copy of a floating tensor (other tensors cloned): the
        inputs of the baseline's full-precision run."""
        if t.is_floating_point():
            return t.detach().to(self.torch.float64)
        return t.detach().clone()

    def clone(self, t):
        return t.clone()

    def snapshot_async(self, t):
        """A copy made on the caller's stream, not waiting for other streams."""
        return t.clone()

    def copy_into(self, dst, src):
        dst.copy_(src)

    def poison(self, t):
        name = self.dtype(t)
        if name in POISON and t.is_contiguous():
            t.view(self._int[t.dtype]).fill_(_signed(POISON[name], 8 * t.element_size()))
        elif t.is_floating_point():
            t.fill_(float("nan"))

    def poison_free_blocks(self, like, copies=6):
        """Fill freed allocator blocks the size of ``like`` with the marked
        NaN, so an output allocated but never written shows it."""
        if not like.is_floating_point():
            return
        hold = [self.torch.empty_like(like, memory_format=self.torch.contiguous_format) for _ in range(copies)]
        for h in hold:
            self.poison(h)
        del hold

    def same_bits(self, a, b):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        name = self.dtype(a)
        if name in POISON:
            return bool(self.torch.equal(a.contiguous().view(self._int[a.dtype]), b.contiguous().view(self._int[b.dtype])))
        return bool(self.torch.equal(a, b))

    def overlaps(self, out, inputs):
        def span(t):
            s = t.untyped_storage()
            return s.data_ptr(), s.data_ptr() + s.nbytes()

        for o in out:
            if o.numel() == 0:
                continue
            a0, a1 = span(o)
            for i in inputs:
                if i.numel() == 0 or i.device != o.device:
                    continue
                b0, b1 = span(i)
                if a0 < b1 and b0 < a1:
                    return True
        return False

    def compare(self, ref, cand):
        """The facts of one output leaf pair (numbers, no verdict)."""
        torch = self.torch
        f = {
            "ref_dtype": self.dtype(ref),
            "cand_dtype": self.dtype(cand),
            "shape_matches": tuple(ref.shape) == tuple(cand.shape),
            "rel_l2": None,
            "nonfinite": 0,
            "poison_left": 0,
            "cand_low_bits_zero": None,
            "ref_low_bits_zero": None,
        }
        if not f["shape_matches"]:
            return f
        cn = f["cand_dtype"]
        if cn in POISON and cand.is_contiguous():
            f["poison_left"] = int((cand.view(self._int[cand.dtype]) == _signed(POISON[cn], 8 * cand.element_size())).sum())
        if ref.is_floating_point() or cand.is_floating_point():
            r = ref.detach().to(torch.float64)
            c = cand.detach().to(device=r.device, dtype=torch.float64)
            rf, cf = torch.isfinite(r), torch.isfinite(c)
            f["nonfinite"] = int((rf & ~cf).sum())
            both = rf & cf
            d = torch.linalg.vector_norm((c - r)[both])
            n = torch.linalg.vector_norm(r[both])
            d, n = float(d), float(n)
            f["rel_l2"] = 0.0 if d == 0.0 else (d / n if n > 0 else 1e30)
            f["cand_low_bits_zero"] = self._low_bits_zero(cand)
            f["ref_low_bits_zero"] = self._low_bits_zero(ref)
        else:
            f["rel_l2"] = 0.0 if bool(torch.equal(ref, cand.to(ref.device))) else 1.0
        return f

    def _low_bits_zero(self, t):
        name = self.dtype(t)
        if name not in LOW_BITS or not t.is_contiguous():
            return None
        bits = t.view(self._int[t.dtype])
        mask = (1 << LOW_BITS[name]) - 1
        nz = (t != 0) & self.torch.isfinite(t)
        n = int(nz.sum())
        if n == 0:
            return None
        return int((((bits & mask) == 0) & nz).sum()) / n


class CallFailed(Exception):
    """A callable raised inside the harness: which, and what it said."""


def _signed(v, bits):
    return v - (1 << bits) if v >= 1 << (bits - 1) else v


class Harness:
    """One gate run: ``run()`` returns the facts (a dict, JSON-ready)."""

    def __init__(
        self,
        backend,
        baseline,
        candidate,
        inputs,
        *,
        shapes=None,
        out=None,
        bytes=None,
        flops=None,
        flush_l2=False,
        checks=6,
        warmup=3,
        min_samples=20,
        min_time=0.2,
        max_time=2.0,
        noise_target=0.005,
        seed=42,
        should_stop=None,
        check_every=4,
        names=("baseline", "candidate"),
        ranges=False,
        wide_baseline=None,
    ):
        self.b = backend
        self.fns = {"baseline": baseline, "candidate": candidate}
        self.names = dict(zip(("baseline", "candidate"), names))
        self.make = inputs
        self.shapes = [None] if shapes is None else list(shapes)
        if not self.shapes:
            raise ValueError("shapes=[] names no shape to time")
        self.out = out
        self.bytes, self.flops = bytes, flops
        self.flush = bool(flush_l2)
        self.checks = max(2, int(checks))
        self.warmup = max(1, int(warmup))
        self.min_samples, self.min_time = int(min_samples), float(min_time)
        self.max_time, self.noise_target = float(max_time), float(noise_target)
        self.rng = random.Random(seed)
        self.seed = seed
        self.should_stop = should_stop or _default_stop
        self.check_every = max(1, int(check_every))
        self.notes = []
        self._seed_n = seed * 1000003
        # NVTX ranges around timed calls, for the engine that reads the trace.
        self._want_ranges = bool(ranges)
        self._ranges = False
        self._ref_like = None
        # The baseline run in float64 (by default the baseline itself, on
        # float64 copies of the inputs): both sides' error is measured
        # against it, so a candidate far less precise than the baseline is
        # seen even when it stays inside the tolerance or is slower.
        self._wide_fn = wide_baseline or baseline
        self._wide_off = None

    # -- helpers -----------------------------------------------------------
    def _fresh(self, shape):
        self._seed_n += 1
        self.b.seed(self._seed_n)
        args = self.make() if shape is None else self.make(shape)
        if not isinstance(args, (list, tuple)):
            args = [args]
        return list(args)

    def _per_shape(self, v, shape):
        return v(shape) if callable(v) else v

    def _call(self, side, args, out_buf=None):
        fn = self.fns[side]
        try:
            if out_buf is not None:
                return fn(*args, out=out_buf)
            return fn(*args)
        except Exception as e:
            raise CallFailed(f"the {side} ({self.names[side]}) raised {type(e).__name__}: {e}") from e

    def _out_buf(self, args):
        if self.out is None:
            return None
        return self.out(*args)

    # -- checks ---------------------------------------------------------------
    def _check(self, shape, k, prev):
        """One checked call: fresh inputs, the candidate first, then the reference."""
        b = self.b
        args = self._fresh(shape)
        leaves = b.leaves(args)
        if prev and prev[-1]["in"] is not None and _all_same(b, leaves, prev[-1]["in"]):
            self.notes.append("inputs() returned the same values twice: the checks shuffled them")
            for t in leaves:
                b.shuffle(t)
        kept = [b.clone(t) for t in leaves]
        facts = {"call": k}
        buf = self._out_buf(args)
        for t in b.leaves(buf):
            b.poison(t)
        if self._ref_like is not None:
            for t in self._ref_like:
                b.poison_free_blocks(t)
        b.sync()
        try:
            r = self._call("candidate", args, buf)
            if buf is not None and r is None:
                r = buf
            out = b.leaves(r)
            early = [b.snapshot_async(t) for t in out]
            b.sync()
        except CallFailed as e:  # the candidate's own failure is a fact
            b.sync()
            facts["error"] = str(e)
            return facts, {"in": kept, "cand": None, "ref": None, "call": k}
        if not out:
            facts["error"] = "the candidate returned no tensor"
            return facts, {"in": kept, "cand": None, "ref": None, "call": k}
        facts["stale_on_stream"] = not all(b.same_bits(a, o) for a, o in zip(early, out))
        facts["aliases_input"] = b.overlaps(out, leaves)
        cand = [b.clone(t) for t in out]
        # The reference on untouched copies of the same inputs.
        rargs = _rebuild(args, iter([b.clone(t) for t in kept]), b)
        rbuf = self._out_buf(rargs)
        rr = self._call("baseline", rargs, rbuf)
        if rbuf is not None and rr is None:
            rr = rbuf
        b.sync()
        ref = b.leaves(rr)
        facts["ref_aliases_input"] = b.overlaps(ref, b.leaves(rargs))
        ref = [b.clone(t) for t in ref]
        if self._ref_like is None:
            self._ref_like = ref
        facts.update(_compare_all(b, ref, cand))
        wide = self._wide_ref(args, kept)
        if wide is not None:
            facts["wide_ref_err"] = _wide_err(b, wide, ref)
            facts["wide_cand_err"] = _wide_err(b, wide, cand)
        for p in prev:
            if p["cand"] is None or p["ref"] is None:
                continue
            if _all_same(b, cand, p["cand"]) and not _all_same(b, ref, p["ref"]):
                facts["repeats_call"] = p["call"]
                break
        return facts, {"in": kept, "cand": cand, "ref": ref, "call": k}

    def _wide_ref(self, args, kept):
        """The baseline's outputs on float64 copies of the inputs, or None
        (with a note, once) where it cannot run so."""
        b = self.b
        if self._wide_off is None:
            if not hasattr(b, "widen"):
                self._wide_off = "this device backend cannot widen tensors"
            elif self.out is not None:
                self._wide_off = "out= buffers hold the reference's own dtype"
        if self._wide_off:
            return None
        wargs = _rebuild(args, iter([b.widen(t) for t in kept]), b)
        try:
            rr = self._wide_fn(*wargs)
            b.sync()
        except Exception as e:
            self._wide_off = f"the baseline raised {type(e).__name__} on float64 inputs"
            self.notes.append(f"no float64 reference for the precision check: {self._wide_off}")
            return None
        out = b.leaves(rr)
        if not out or any(b.dtype(t) != "f64" for t in out if b.dtype(t) in _RANK):
            self._wide_off = "the baseline did not return float64 for float64 inputs"
            self.notes.append(f"no float64 reference for the precision check: {self._wide_off}")
            return None
        return [b.clone(t) for t in out]

    # -- timing ---------------------------------------------------------------
    def _timed(self, side, args, buf, tag=None):
        b = self.b
        e0, e1, e2 = b.event(), b.event(), b.event()
        b.sync()
        mark = tag is not None and self._ranges
        if mark:
            b.range_push(tag)
        t0 = b.now()
        b.record(e0)
        r = self._call(side, args, buf)
        b.record(e1)
        b.sync()
        b.record(e2)
        stream = b.elapsed(e0, e1)
        event = b.elapsed(e0, e2)
        t1 = b.now()
        if mark:
            b.range_pop()
        return r, event, stream, t1 - t0

    def _window(self, fn):
        """One timed window around ``fn`` (the probes: empty, one kernel)."""
        b = self.b
        e0, e1, e2 = b.event(), b.event(), b.event()
        b.sync()
        b.record(e0)
        fn()
        b.record(e1)
        b.sync()
        b.record(e2)
        return b.elapsed(e0, e2)

    def _probes(self):
        """An empty call's window and a one-kernel call's, timed beside the
        pair every round (same clocks, same load)."""
        self._floor.append(self._window(_nothing))
        probe = getattr(self.b, "probe_kernel", None)
        if probe is not None:
            self._one.append(self._window(probe))

    def _phase(self, si, pool, banks, refs, flush, budget, check_log, watched):
        """Timed rounds until both sides may stop; returns per-side samples."""
        b = self.b
        s = {side: {"event_s": [], "stream_s": [], "wall_s": []} for side in self.fns}
        start = b.now()
        rnd = 0
        while True:
            order = ["baseline", "candidate"]
            self.rng.shuffle(order)
            p = rnd % len(pool)
            v = (rnd // len(pool)) % len(banks[p])
            self._probes()
            for side in order:
                # Fresh values in the same buffers: a cache keyed on the
                # inputs' addresses goes stale.
                for dst, src in zip(b.leaves(pool[p]), b.leaves(banks[p][v])):
                    b.copy_into(dst, src)
                buf = self._out_buf(pool[p])
                if flush:
                    b.flush_l2()
                tag = f"kopt.gate/{si}/{'cold' if flush else 'warm'}/{side}/{len(s[side]['event_s'])}"
                r, ev, st, wall = self._timed(side, pool[p], buf, tag)
                if buf is not None and r is None:
                    r = buf
                if side == "candidate":
                    self._tamper(watched)
                    # At random: a candidate counting its calls cannot tell which are checked.
                    if self.rng.random() * self.check_every < 1.0:
                        self._check_timed(r, refs[p][v], check_log)
                s[side]["event_s"].append(ev)
                s[side]["stream_s"].append(st)
                s[side]["wall_s"].append(wall)
            rnd += 1
            elapsed = b.now() - start
            if elapsed >= budget:
                break
            if all(self.should_stop(s[x]["event_s"], elapsed, self.min_samples, self.min_time, self.noise_target, budget) for x in s):
                break
        return s

    def _check_timed(self, r, ref, log):
        b = self.b
        out = [b.clone(t) for t in b.leaves(r)]
        b.sync()
        f = {"call": len(log)}
        if not out:
            f["error"] = "the candidate returned no tensor"
        else:
            f.update(_compare_all(b, ref, out))
        log.append(f)

    def _tamper(self, watched):
        now = self.b.watched()
        for k, v in watched["at_start"].items():
            changed = now.get(k) is not v if callable(v) else now.get(k) != v
            if changed and k not in watched["changed"]:
                watched["changed"].append(k)

    # -- the run --------------------------------------------------------------
    def run(self):
        b = self.b
        t_start = b.now()
        at_start = b.watched()
        watched = {"at_start": at_start, "changed": list(b.foreign(at_start))}
        shapes = []
        self._floor, self._one = [], []
        for _ in range(5):
            self._probes()
        n_shapes = len(self.shapes)
        per_shape = self.max_time / n_shapes
        self._ranges = self._want_ranges and bool(getattr(b, "ranges", lambda: False)())
        for si, shape in enumerate(self.shapes):
            self._ref_like = None
            label = "default" if shape is None else str(shape)
            prev, check_log = [], []
            first = self.checks // 2
            for _ in range(first):
                f, keep = self._check(shape, len(check_log), prev)
                _keep(prev, keep)
                check_log.append(f)
                self._tamper(watched)
            # A pool of two input sets, each with two banks of values.
            pool = [self._fresh(shape) for _ in range(2)]
            banks = [[self._fresh(shape) for _ in range(2)] for _ in pool]
            for p, bank in zip(pool, banks):
                if not _same_layout(b, b.leaves(p), [b.leaves(x) for x in bank]):
                    raise ValueError("inputs() returned different shapes or dtypes on two calls for the same shape: give shapes=[...] and build each from its shape")
            refs = []
            for bank in banks:
                rs = []
                for vals in bank:
                    args = _rebuild(vals, iter([b.clone(t) for t in b.leaves(vals)]), b)
                    buf = self._out_buf(args)
                    rr = self._call("baseline", args, buf)
                    rr = buf if (buf is not None and rr is None) else rr
                    rs.append([b.clone(t) for t in b.leaves(rr)])
                b.sync()
                refs.append(rs)
            for side in ("baseline", "candidate"):
                for i in range(self.warmup):
                    self._timed(side, pool[i % 2], self._out_buf(pool[i % 2]))
            self._tamper(watched)
            budget = per_shape / (2 if self.flush else 1)
            warm = self._phase(si, pool, banks, refs, False, budget, check_log, watched)
            cold = self._phase(si, pool, banks, refs, True, budget, check_log, watched) if self.flush else None
            for _ in range(first, self.checks):
                f, keep = self._check(shape, len(check_log), prev)
                _keep(prev, keep)
                check_log.append(f)
                self._tamper(watched)
            sides = {}
            for side in ("baseline", "candidate"):
                d = dict(warm[side])
                d["name"] = self.names[side]
                d["flushed_s"] = cold[side]["event_s"] if cold else []
                sides[side] = d
            shapes.append(
                {
                    "shape": label,
                    "baseline": sides["baseline"],
                    "candidate": sides["candidate"],
                    "checks": check_log,
                    "bytes": _num(self._per_shape(self.bytes, shape)),
                    "flops": _num(self._per_shape(self.flops, shape)),
                    "tampered": list(watched["changed"]),
                }
            )
        if not self._ranges:
            self.notes.append("kopt's tracer is not loaded in this process: side streams and kernel-less calls are judged from CUDA events and host time")
        return {
            "device": b.name,
            "l2_bytes": float(b.l2),
            "empty_window_s": _median(self._floor),
            "kernel_window_s": _median(self._one),
            "shapes": shapes,
            "seconds": b.now() - t_start,
            "notes": sorted(set(self.notes), key=self.notes.index),
        }


def _compare_all(b, ref, cand):
    """One check's facts; an output the comparison cannot read is an error fact."""
    try:
        return _merge([b.compare(x, y) for x, y in zip(ref, cand)], len(ref) == len(cand))
    except Exception as e:
        return {"error": f"the outputs could not be compared ({type(e).__name__}: {e})", "shape_matches": False}


def _wide_err(b, wide, outs):
    """The largest relative L2 error of ``outs`` against the float64 run;
    None where a leaf cannot be compared."""
    if len(wide) != len(outs):
        return None
    errs = []
    for w, o in zip(wide, outs):
        try:
            e = b.compare(w, o).get("rel_l2")
        except Exception:
            return None
        if e is None:
            return None
        errs.append(e)
    return max(errs) if errs else None


def _nothing():
    pass


def _median(v):
    if not v:
        return None
    s = sorted(v)
    return s[len(s) // 2]


def _keep(prev, keep):
    """Keep a check's outputs for the repeat test; only the last one's inputs."""
    if prev:
        prev[-1]["in"] = None
    prev.append(keep)


def _num(v):
    return None if v is None else float(v)


def _default_stop(samples, elapsed, min_samples, min_time, noise_target, max_time):
    """kopt bench's stopping rule, for the harness run without kopt (the
    engine's path); kopt.bench passes kopt_bench's own."""
    if elapsed >= max_time:
        return True
    if len(samples) < min_samples or elapsed < min_time:
        return False
    s = sorted(samples)
    m = s[len(s) // 2]
    if m <= 0:
        return False
    dev = sorted(abs(x - m) for x in samples)
    return 1.4826 * dev[len(dev) // 2] / m <= noise_target


def _all_same(b, xs, ys):
    return len(xs) == len(ys) and all(b.same_bits(x, y) for x, y in zip(xs, ys))


def _same_layout(b, xs, banks):
    for ys in banks:
        if len(xs) != len(ys):
            return False
        for x, y in zip(xs, ys):
            if b.layout(x) != b.layout(y):
                return False
    return True


def _rebuild(args, clones, b):
    """``args`` with every tensor replaced by the next of ``clones``."""
    if b.is_tensor(args):
        return next(clones)
    if isinstance(args, list):
        return [_rebuild(a, clones, b) for a in args]
    if isinstance(args, tuple):
        return tuple(_rebuild(a, clones, b) for a in args)
    if isinstance(args, dict):
        return {k: _rebuild(v, clones, b) for k, v in args.items()}
    return args


_RANK = {"f64": 53, "f32": 24, "f16": 11, "bf16": 8}


def _merge(per_leaf, same_count):
    """One check's facts from its output leaves: the worst of each."""
    f = {
        "shape_matches": same_count and all(x["shape_matches"] for x in per_leaf),
        "nonfinite": sum(x["nonfinite"] for x in per_leaf),
        "poison_left": sum(x["poison_left"] for x in per_leaf),
        "rel_l2": None,
        "ref_dtype": "",
        "cand_dtype": "",
    }
    errs = [x["rel_l2"] for x in per_leaf]
    if per_leaf and all(e is not None for e in errs):
        f["rel_l2"] = max(errs)
    drop = -1e9
    for x in per_leaf:
        d = _RANK.get(x["ref_dtype"], 0) - _RANK.get(x["cand_dtype"], 0)
        if d > drop:
            drop = d
            f["ref_dtype"], f["cand_dtype"] = x["ref_dtype"], x["cand_dtype"]
    lows = [(x["cand_low_bits_zero"], x["ref_low_bits_zero"]) for x in per_leaf if x["cand_low_bits_zero"] is not None and x["ref_low_bits_zero"] is not None]
    if lows:
        f["cand_low_bits_zero"], f["ref_low_bits_zero"] = max(lows, key=lambda p: p[0] - p[1])
    return f


# -- module scripts (kopt bench --script A.py --candidate-script B.py) ---------


def _load(path, name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _module_side(torch, mod, cls, init, device, dtype=None):
    Model = getattr(mod, cls, None)
    if Model is None:
        raise SystemExit(f"kopt gate: {mod.__file__} has no class {cls}")
    torch.manual_seed(0)
    m = Model(*init).to(device)
    if dtype is not None:
        m = m.to(dtype)
    m.eval()

    def call(*args):
        with torch.no_grad():
            return m(*args)

    return call


def main(argv=None):
    """Run the gate on two module scripts and write the facts as JSON."""
    import argparse

    p = argparse.ArgumentParser(prog="kopt-gate-harness")
    p.add_argument("--baseline", required=True)
    p.add_argument("--candidate", required=True)
    p.add_argument("--module", default="Model")
    p.add_argument("--out", required=True)
    p.add_argument("--flush-l2", action="store_true")
    p.add_argument("--checks", type=int, default=6)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--min-samples", type=int, default=20)
    p.add_argument("--min-time", type=float, default=0.2)
    p.add_argument("--max-time", type=float, default=2.0)
    p.add_argument("--noise-target", type=float, default=0.005)
    p.add_argument("--seed", type=int, default=42)
    a = p.parse_args(argv)
    import torch

    backend = TorchBackend(torch)
    ma = _load(a.baseline, "kopt_gate_baseline")
    mb = _load(a.candidate, "kopt_gate_candidate")
    init = list(getattr(ma, "get_init_inputs", lambda: [])())
    base = _module_side(torch, ma, a.module, init, backend.device)
    cand = _module_side(torch, mb, a.module, init, backend.device)
    # The baseline's module in float64, built from the same seed, for the
    # precision check's reference.
    wide = _module_side(torch, ma, a.module, init, backend.device, torch.float64)

    def inputs():
        return [x.to(backend.device) if isinstance(x, torch.Tensor) else x for x in ma.get_inputs()]

    h = Harness(
        backend,
        base,
        cand,
        inputs,
        flush_l2=a.flush_l2,
        checks=a.checks,
        warmup=a.warmup,
        min_samples=a.min_samples,
        min_time=a.min_time,
        max_time=a.max_time,
        noise_target=a.noise_target,
        seed=a.seed,
        names=(a.baseline, a.candidate),
        ranges=True,
        wide_baseline=wide,
    )
    facts = h.run()
    with open(a.out, "w") as f:
        json.dump(facts, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
