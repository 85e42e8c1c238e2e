"""Workloads for checking kopt's graph-capture prediction (issue 14): seed
000's MoE routing step, a 6-layer MLP at batch 2, a 4-block attention
decode step at batch 1, a compute-bound pair of 8192-wide matmuls, and two
added later to check on steps the constants were not set from: a 2-layer
LSTM cell unrolled over 12 time steps at batch 2, and a small eval-mode
CNN (4 x conv3x3 + batch norm + ReLU, 32 channels, one 64x64 image);
and two held out of every constant (added after they were set): two
PyTorch transformer encoder layers (d 256, 4 heads) on 16 tokens, and a
2-layer GRU (cuDNN) over 16 time steps at batch 1 with a linear head.

  python3 workloads.py NAME measure            eager vs CUDA-graph replay, bare (JSON line)
  python3 workloads.py NAME steps N            N steps in NVTX ranges (for kopt trace), eager
  python3 workloads.py NAME profile OUT.json   torch.profiler (wait 1, warm-up 2, active 10)
  python3 workloads.py NAME timed N OUT.jsonl  N steps, time per step of the last 2/3 appended
  python3 workloads.py replay_cost             graph replay cost per kernel (JSON line)
"""

import json
import sys

import torch
import torch.nn.functional as F

torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
bf16 = torch.bfloat16


class Moe(torch.nn.Module):
    def forward(self, logits):
        probs = torch.softmax(logits, dim=-1)
        w, ids = torch.topk(probs, 8, dim=-1)
        w = w / w.sum(dim=-1, keepdim=True)
        sorted_ids, order = torch.sort(ids.flatten(), stable=True)
        shared = torch.full((ids.shape[0], 1), 64, dtype=ids.dtype, device=ids.device)
        return torch.cat([ids, shared], 1), torch.cat([w, torch.ones_like(w[:, :1])], 1), sorted_ids, order


class Mlp(torch.nn.Module):
    def __init__(self, width=1024, layers=6):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x):
        for layer in self.layers:
            x = F.gelu(layer(x)) + x
        return self.norm(x)


class Block(torch.nn.Module):
    def __init__(self, d=1024, heads=16, ctx=512):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.up, self.down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
        self.register_buffer("k_cache", torch.randn(1, heads, ctx, d // heads))
        self.register_buffer("v_cache", torch.randn(1, heads, ctx, d // heads))

    def forward(self, x):  # x: [1, 1, d], one new token
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=-1)
        q = q.view(1, 1, self.heads, self.hd).transpose(1, 2)
        k = torch.cat([self.k_cache, k.view(1, 1, self.heads, self.hd).transpose(1, 2)], 2)
        v = torch.cat([self.v_cache, v.view(1, 1, self.heads, self.hd).transpose(1, 2)], 2)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(1, 1, -1)
        x = x + self.proj(a)
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Decode(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(4))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


class Matmuls(torch.nn.Module):
    def __init__(self, n=8192):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(n, n) / n**0.5)
        self.w2 = torch.nn.Parameter(torch.randn(n, n) / n**0.5)

    def forward(self, x):
        return (x @ self.w1) @ self.w2


class Lstm(torch.nn.Module):
    def __init__(self, width=256, steps=12):
        super().__init__()
        self.cells = torch.nn.ModuleList(torch.nn.LSTMCell(width, width) for _ in range(2))
        self.steps = steps

    def forward(self, x):  # x: [batch, width], fed at every time step
        state = [(torch.zeros_like(x), torch.zeros_like(x)) for _ in self.cells]
        for _ in range(self.steps):
            h = x
            for i, cell in enumerate(self.cells):
                state[i] = cell(h, state[i])
                h = state[i][0]
        return h


class Convnet(torch.nn.Module):
    def __init__(self, ch=32, layers=4):
        super().__init__()
        mods = []
        for i in range(layers):
            mods += [torch.nn.Conv2d(3 if i == 0 else ch, ch, 3, padding=1), torch.nn.BatchNorm2d(ch), torch.nn.ReLU()]
        self.body = torch.nn.Sequential(*mods)
        self.head = torch.nn.Linear(ch, 10)

    def forward(self, x):
        return self.head(self.body(x).mean(dim=(2, 3)))


class Encoder(torch.nn.Module):
    def __init__(self, d=256, layers=2):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0, batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

    def forward(self, x):
        return self.enc(x)


class Gru(torch.nn.Module):
    def __init__(self, width=256):
        super().__init__()
        self.rnn = torch.nn.GRU(width, width, 2, batch_first=True)
        self.head = torch.nn.Linear(width, 32)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


def build(name):
    if name == "moe":
        return Moe().to(dev), [torch.randn(4, 64, device=dev)]
    if name == "mlp":
        return Mlp().to(dev, bf16), [torch.randn(2, 1024, device=dev, dtype=bf16)]
    if name == "decode":
        return Decode().to(dev, bf16), [torch.randn(1, 1, 1024, device=dev, dtype=bf16)]
    if name == "matmuls":
        return Matmuls().to(dev, bf16), [torch.randn(8192, 8192, device=dev, dtype=bf16)]
    if name == "lstm":
        return Lstm().to(dev), [torch.randn(2, 256, device=dev)]
    if name == "convnet":
        return Convnet().to(dev).eval(), [torch.randn(1, 3, 64, 64, device=dev)]
    if name == "encoder":
        return Encoder().to(dev).eval(), [torch.randn(1, 16, 256, device=dev)]
    if name == "gru":
        return Gru().to(dev).eval(), [torch.randn(1, 16, 256, device=dev)]
    raise SystemExit(f"unknown workload {name}")


def per_step_us(fn, steps):
    """Mean time per step over `steps` back-to-back steps (CUDA events)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(steps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / steps


def graph_of(fn, inputs):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn(*inputs)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn(*inputs)
    return g


def measure(name):
    model, inputs = build(name)
    measure_model(name, model, inputs, 20 if name == "matmuls" else 500)


def measure_model(name, model, inputs, steps=500):
    """Eager vs CUDA-graph replay of one step, bare: 5 interleaved rounds of
    `steps` steps, medians, one JSON line on stdout."""
    with torch.inference_mode():
        for _ in range(10):
            model(*inputs)
        g = graph_of(model, inputs)
        rounds = []
        for _ in range(5):  # interleaved rounds: eager, graph
            rounds.append((per_step_us(lambda: model(*inputs), steps), per_step_us(g.replay, steps)))
    eager = sorted(r[0] for r in rounds)[2]
    graph = sorted(r[1] for r in rounds)[2]
    print(json.dumps({"workload": name, "eager_us": eager, "graph_us": graph, "speedup": eager / graph, "rounds": rounds}))


def steps(name, n):
    model, inputs = build(name)
    with torch.inference_mode():
        for i in range(n):
            torch.cuda.nvtx.range_push("step")
            model(*inputs)
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()


def timed(name, n, out):
    """n steps in NVTX "step" ranges; the mean time per step of the last two
    thirds (CUDA events) appended to `out` as one JSON line, tagged with
    $KOPT_MODE: the same steps bare and under each tracer mode."""
    import os

    model, inputs = build(name)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    warm = n // 3
    with torch.inference_mode():
        for i in range(n):
            if i == warm:
                torch.cuda.synchronize()
                start.record()
            torch.cuda.nvtx.range_push("step")
            model(*inputs)
            torch.cuda.nvtx.range_pop()
        end.record()
        end.synchronize()
    us = start.elapsed_time(end) * 1e3 / (n - warm)
    with open(out, "a") as f:
        f.write(json.dumps({"workload": name, "mode": os.environ.get("KOPT_MODE", "?"), "step_us": us}) + "\n")


def profile(name, out):
    from torch.profiler import ProfilerActivity, profile as prof, schedule

    model, inputs = build(name)
    with torch.inference_mode(), prof(
        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
        schedule=schedule(wait=1, warmup=2, active=10),
        on_trace_ready=lambda p: p.export_chrome_trace(out),
    ) as p:
        for _ in range(13):
            model(*inputs)
            p.step()
        torch.cuda.synchronize()


def replay_cost():
    """Per-kernel cost of graph replay beyond the kernels' own GPU time: a
    graph of N tiny kernels, replay time minus the kernels' summed time."""
    from torch.profiler import ProfilerActivity, profile as prof

    x = torch.zeros(1, device=dev)
    out = {}
    for n in (50, 200):
        def chain():
            for _ in range(n):
                x.add_(1.0)
        g = graph_of(lambda: chain(), [])
        replay = per_step_us(g.replay, 200)
        with prof(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(20):
                g.replay()
            torch.cuda.synchronize()
        kernel_us = sum(e.device_time_total for e in p.key_averages()) / 20
        out[n] = {"replay_us": replay, "kernel_us_per_replay": kernel_us, "cost_ns_per_kernel": 1e3 * (replay - kernel_us) / n}
    print(json.dumps({"replay_cost": out}))


if __name__ == "__main__":
    name, mode = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
    if name == "replay_cost":
        replay_cost()
    elif mode == "measure":
        measure(name)
    elif mode == "steps":
        steps(name, int(sys.argv[3]))
    elif mode == "profile":
        profile(name, sys.argv[3])
    elif mode == "timed":
        timed(name, int(sys.argv[3]), sys.argv[4])
    else:
        raise SystemExit(__doc__)
