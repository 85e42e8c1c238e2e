"""Data-parallel cases with a known fix, for kopt's multi-GPU analysis.

Run under torchrun, one process a GPU:
    torchrun --nproc_per_node=2 ddp_suite.py OUT [CASE...]
    torchrun --nproc_per_node=2 ddp_suite.py --only CASE:base|fix

Each case builds the baseline and its fix side by side, times them in
alternating rounds (A/B on the same GPUs, the same run), then records a
torch.profiler trace of each on every rank:
    OUT/CASE/base/rank{R}.json   OUT/CASE/fix/rank{R}.json
and rank 0 writes OUT/CASE/truth.json: median step time of each variant per
rank and the measured gain of the fix (the slowest rank's step, which is the
job's). The traces are what `kopt analyze OUT/CASE/base` reads.
"""

import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

ROUNDS = 3
STEPS = 20
WARMUP = 8


def mlp(width, depth):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    return nn.Sequential(*layers)


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def blocks(d, depth):
    return nn.Sequential(*[Block(d) for _ in range(depth)])


class Variant:
    """One model under one wrapping, with its optimizer, input and extra work."""

    def __init__(self, name, model, batch, extra=None, autocast=False):
        self.name = name
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=1e-4)
        self.x = batch
        self.extra = extra
        self.autocast = autocast

    def step(self):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.autocast):
            if self.extra is not None:
                self.extra()
            loss = self.model(self.x).float().pow(2).mean()
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


def ddp(model, rank, **kw):
    return DDP(model.cuda(rank), device_ids=[rank], **kw)


def straggler_work(rank, n):
    a = torch.randn(4096, 4096, device=f"cuda:{rank}")

    def work():
        if rank == 1:
            for _ in range(n):
                torch.mm(a, a)

    return work


def case_tiny_buckets(rank):
    torch.manual_seed(0)
    x = torch.randn(512, 1024, device=rank)
    base = ddp(mlp(1024, 48), rank, bucket_cap_mb=0.25)
    fix = ddp(mlp(1024, 48), rank)
    return Variant("base", base, x), Variant("fix", fix, x), "DDP bucket_cap_mb=0.25 -> default 25"


def case_find_unused(rank):
    torch.manual_seed(0)
    x = torch.randn(256, 1024, device=rank)
    base = ddp(mlp(1024, 64), rank, find_unused_parameters=True)
    fix = ddp(mlp(1024, 64), rank)
    return Variant("base", base, x), Variant("fix", fix, x), "find_unused_parameters=True (none unused) -> False"


def case_fp32_grads(rank):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    torch.manual_seed(0)
    x = torch.randn(128, 4096, device=rank)
    base = ddp(mlp(4096, 8), rank)
    fix = ddp(mlp(4096, 8), rank)
    fix.register_comm_hook(None, default_hooks.bf16_compress_hook)
    return (
        Variant("base", base, x, autocast=True),
        Variant("fix", fix, x, autocast=True),
        "fp32 gradient all-reduce -> bf16_compress_hook",
    )


def case_straggler(rank):
    torch.manual_seed(0)
    x = torch.randn(256, 2048, device=rank)
    base = ddp(mlp(2048, 16), rank)
    fix = ddp(mlp(2048, 16), rank)
    return (
        Variant("base", base, x, extra=straggler_work(rank, 24)),
        Variant("fix", fix, x),
        "rank 1 does extra work each step -> balanced",
    )


def case_fsdp_no_prefetch(rank):
    from torch.distributed.fsdp import BackwardPrefetch
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import ModuleWrapPolicy

    torch.manual_seed(0)
    x = torch.randn(8, 512, 1024, device=rank)

    def wrap(prefetch):
        return FSDP(
            blocks(1024, 16).cuda(rank),
            auto_wrap_policy=ModuleWrapPolicy({Block}),
            backward_prefetch=prefetch,
            forward_prefetch=prefetch is not None,
            device_id=rank,
        )

    return (
        Variant("base", wrap(None), x),
        Variant("fix", wrap(BackwardPrefetch.BACKWARD_PRE), x),
        "FSDP backward_prefetch=None -> BACKWARD_PRE (+forward_prefetch)",
    )


CASES = {
    "tiny_buckets": case_tiny_buckets,
    "find_unused": case_find_unused,
    "fp32_grads": case_fp32_grads,
    "straggler": case_straggler,
    "fsdp_no_prefetch": case_fsdp_no_prefetch,
}


def timed(v, rank):
    """Seconds a step, over STEPS steps after a barrier."""
    dist.barrier()
    torch.cuda.synchronize(rank)
    t0 = time.perf_counter()
    for _ in range(STEPS):
        v.step()
    torch.cuda.synchronize(rank)
    return (time.perf_counter() - t0) / STEPS


def trace(v, rank, path):
    from torch.profiler import ProfilerActivity, profile, schedule

    os.makedirs(os.path.dirname(path), exist_ok=True)
    dist.barrier()
    sched = schedule(wait=1, warmup=2, active=3, repeat=1)
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=sched,
        record_shapes=True,
        on_trace_ready=lambda p: p.export_chrome_trace(path),
    ) as p:
        for _ in range(6):
            v.step()
            p.step()
    torch.cuda.synchronize(rank)


def run_case(name, out, rank, world):
    base, fix, what = CASES[name](rank)
    for v in (base, fix):
        for _ in range(WARMUP):
            v.step()
    times = {"base": [], "fix": []}
    for _ in range(ROUNDS):
        for v in (base, fix):
            times[v.name].append(timed(v, rank))
    for v in (base, fix):
        trace(v, rank, f"{out}/{name}/{v.name}/rank{rank}.json")
    med = {k: statistics.median(s) for k, s in times.items()}
    gathered = [None] * world
    dist.all_gather_object(gathered, med)
    if rank == 0:
        job = {k: max(g[k] for g in gathered) for k in ("base", "fix")}
        truth = {
            "case": name,
            "fix": what,
            "world_size": world,
            "step_s_per_rank": gathered,
            "step_s": job,
            "gain": job["base"] / job["fix"],
            "rounds": ROUNDS,
            "steps_per_round": STEPS,
        }
        with open(f"{out}/{name}/truth.json", "w") as f:
            json.dump(truth, f, indent=1)
        print(f"{name}: base {job['base']*1e3:.2f} ms fix {job['fix']*1e3:.2f} ms gain {truth['gain']:.2f}x", flush=True)
    del base, fix
    torch.cuda.empty_cache()


def run_only(spec, rank):
    """One variant's steps alone, each an NVTX `ProfilerStep#N` range: what
    `kopt trace -- torchrun ddp_suite.py --only CASE:VARIANT` records."""
    name, variant = spec.split(":")
    base, fix, _ = CASES[name](rank)
    v = base if variant == "base" else fix
    for _ in range(WARMUP):
        v.step()
    torch.cuda.synchronize(rank)
    dist.barrier()
    for i in range(10):
        torch.cuda.nvtx.range_push(f"ProfilerStep#{i}")
        v.step()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize(rank)


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    world = dist.get_world_size()
    torch.cuda.set_device(rank)
    if sys.argv[1] == "--only":
        run_only(sys.argv[2], rank)
        dist.destroy_process_group()
        return
    out = sys.argv[1]
    names = sys.argv[2:] or list(CASES)
    for name in names:
        try:
            run_case(name, out, rank, world)
        except Exception as e:  # one failing case must not lose the others
            print(f"rank {rank} case {name} failed: {type(e).__name__}: {e}", flush=True)
            dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
