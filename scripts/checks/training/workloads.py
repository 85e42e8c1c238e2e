"""The training suite's workloads: each builds a baseline step and its
candidate fixes, every one a zero-argument function running one whole step
(data, forward, loss, backward, optimizer for a training step). Each
variant owns its model and optimizer, built from the same seed. The
baseline is written the way the issue's users write it: the sync, the
pageable copy or the optimizer form is the thing under test. A line a fix
changes is marked `# fix:`; the trace names these lines.
"""

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F

DEV = "cuda"


def cnn():
    layers = []
    c = 3
    for w in (32, 64, 64, 128, 128, 256):
        layers += [nn.Conv2d(c, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU()]
        c = w
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 10))


def transformer(d=512, layers=4):
    enc = nn.TransformerEncoderLayer(d, 8, 4 * d, batch_first=True, dropout=0.0)
    return nn.Sequential(nn.TransformerEncoder(enc, layers, enable_nested_tensor=False), nn.Linear(d, 10))


def mlp(width=256, depth=24):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


def train_variant(make, x, y, opt_kw, autocast=False, set_to_none=True, opt_cls=torch.optim.AdamW):
    torch.manual_seed(0)
    m = make().to(DEV)
    opt = opt_cls(m.parameters(), lr=1e-4, **opt_kw)

    def step():
        if autocast:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(m(x).float().reshape(-1, 10), y)
        else:
            loss = F.cross_entropy(m(x).reshape(-1, 10), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=set_to_none)

    return step


def optimizer_forms(make, x, y, base_kw, opt_cls=torch.optim.AdamW, set_to_none=True, bf16=True):
    v = {"eager": train_variant(make, x, y, base_kw, opt_cls=opt_cls, set_to_none=set_to_none)}
    if base_kw.get("foreach") is False:
        v["foreach"] = train_variant(make, x, y, {"foreach": True}, opt_cls=opt_cls, set_to_none=set_to_none)
    v["fused"] = train_variant(make, x, y, {"fused": True}, opt_cls=opt_cls, set_to_none=set_to_none)
    if not set_to_none:
        v["set_to_none"] = train_variant(make, x, y, base_kw, opt_cls=opt_cls, set_to_none=True)
    if bf16:
        v["bf16_autocast"] = train_variant(make, x, y, base_kw, autocast=True, opt_cls=opt_cls,
                                           set_to_none=set_to_none)
    return v


def w_cnn_forloop():
    x = torch.randn(64, 3, 32, 32, device=DEV)
    y = torch.randint(0, 10, (64,), device=DEV)
    return optimizer_forms(cnn, x, y, {"foreach": False})


def w_transformer_foreach():
    x = torch.randn(16, 128, 512, device=DEV)
    y = torch.randint(0, 10, (16 * 128,), device=DEV)
    return optimizer_forms(transformer, x, y, {"foreach": True})


def w_mlp_sgd_forloop():
    x = torch.randn(128, 256, device=DEV)
    y = torch.randint(0, 10, (128,), device=DEV)
    kw = {"foreach": False, "momentum": 0.9}

    def sgd(params, lr, **k):
        return torch.optim.SGD(params, lr=lr, **{**kw, **k})

    return {**optimizer_forms(mlp, x, y, {"foreach": False}, opt_cls=sgd, bf16=False), "graph": "graph"}


def w_transformer_zero_fill():
    x = torch.randn(32, 256, 256, device=DEV)
    y = torch.randint(0, 10, (32 * 256,), device=DEV)
    v = {**optimizer_forms(lambda: transformer(256, 6), x, y, {"fused": True}, set_to_none=False), "graph": "graph"}
    v.pop("fused")  # the baseline is already fused
    return v


def w_fp32_big_gemm():
    x = torch.randn(4096, 2048, device=DEV)
    y = torch.randint(0, 10, (4096,), device=DEV)
    make = lambda: nn.Sequential(nn.Linear(2048, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(),  # noqa: E731
                                 nn.Linear(4096, 10))
    v = {"eager": train_variant(make, x, y, {"fused": True}),
         "bf16_autocast": train_variant(make, x, y, {"fused": True}, autocast=True)}
    tf = train_variant(make, x, y, {"fused": True})

    def tf32():
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            tf()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False

    v["tf32"] = tf32
    return v


class SyncEveryLayer(nn.Module):
    """A forward that checks each layer's output on the host."""

    def __init__(self, width=2048, depth=12, check=True):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.check = check

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
            if self.check and x.abs().max().item() > 1e6:  # fix: remove the per-layer check
                raise FloatingPointError("diverged")
        return x


def w_sync_item_layer():
    torch.manual_seed(0)
    x = torch.randn(1024, 2048, device=DEV)
    m = SyncEveryLayer().to(DEV)
    mn = copy.deepcopy(m)
    mn.check = False

    def run(mm):
        def f():
            with torch.no_grad():
                mm(x)
        return f

    def tf32():
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            run(m)()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False

    return {"eager": run(m), "no_sync": run(mn), "tf32": tf32}


class MaskedMLP(nn.Module):
    def __init__(self, width=1024, depth=8, where=False):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.where = where

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if self.where:
                x = torch.where(x > 0, x, torch.zeros_like(x))
            else:
                keep = x.abs().sum(1) > 0  # rows not all zero (all of them, here)
                x = torch.relu(x[keep])  # fix: a boolean-mask select syncs (nonzero); torch.where does not
        return x


def w_sync_bool_mask():
    x = torch.randn(256, 1024, device=DEV)
    y = torch.randint(0, 10, (256,), device=DEV)
    base = train_variant(lambda: nn.Sequential(MaskedMLP(), nn.Linear(1024, 10)), x, y, {"fused": True})
    fixed = train_variant(lambda: nn.Sequential(MaskedMLP(where=True), nn.Linear(1024, 10)), x, y, {"fused": True})
    return {"eager": base, "no_sync": fixed}


def w_sync_cpu_print():
    x = torch.randn(64, 128, 256, device=DEV)
    y = torch.randint(0, 10, (64 * 128,), device=DEV)
    losses = []

    def make_step(log):
        torch.manual_seed(0)
        m = transformer(256, 2).to(DEV)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
        i = [0]

        def step():
            logits = m(x).reshape(-1, 10)
            loss = F.cross_entropy(logits, y)
            if log:
                acc = (logits.argmax(-1) == y).float().mean().cpu()  # fix: log on the GPU, read rarely
                losses.append(loss.tolist())  # fix: keep the tensor, read it later
                if i[0] % 1000 == 0:
                    print("loss", loss, "acc", acc)
            else:
                losses.append(loss.detach())
            i[0] += 1
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    return {"eager": make_step(True), "no_sync": make_step(False)}


def w_copy_pageable():
    torch.manual_seed(0)
    host_x = torch.randn(256, 3, 64, 64)
    host_y = torch.randint(0, 10, (256,))
    pin_x, pin_y = host_x.pin_memory(), host_y.pin_memory()

    def make(pinned):
        torch.manual_seed(0)
        m = cnn().to(DEV)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
        hx, hy = (pin_x, pin_y) if pinned else (host_x, host_y)

        def step():
            x = hx.to(DEV, non_blocking=pinned)  # fix: pin_memory() + non_blocking=True
            y = hy.to(DEV, non_blocking=pinned)
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    return {"eager": make(False), "pin_memory": make(True)}


class Noisy(torch.utils.data.Dataset):
    """Host-side preparation that costs CPU time per sample."""

    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(3, 64, 64, generator=g)
        x = (x - x.mean()) / (x.std() + 1e-5)
        return x, i % 10


def w_dataloader():
    def make(workers, pin):
        torch.manual_seed(0)
        m = cnn().to(DEV)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4, fused=True)
        kw = {"num_workers": workers, "pin_memory": pin}
        if workers:
            kw.update(persistent_workers=True, prefetch_factor=4)
        loader = torch.utils.data.DataLoader(Noisy(), batch_size=128, **kw)  # fix: num_workers=4, pin_memory=True
        it = iter(loader)

        def step():
            x, y = next(it)
            x, y = x.to(DEV, non_blocking=pin), y.to(DEV, non_blocking=pin)
            loss = F.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return step

    return {"eager": make(0, False), "pin_memory": make(0, True), "workers_pinned": make(4, True)}


def w_graph_legal():
    torch.manual_seed(0)
    x = torch.randn(32, 256, device=DEV)
    m = mlp(256, 32).to(DEV).eval()

    def eager():
        with torch.no_grad():
            return m(x)

    def tf32():
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            eager()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False

    return {"eager": eager, "graph": "graph", "tf32": tf32}


WORKLOADS = {
    "cnn_forloop": w_cnn_forloop,
    "transformer_foreach": w_transformer_foreach,
    "mlp_sgd_forloop": w_mlp_sgd_forloop,
    "transformer_zero_fill": w_transformer_zero_fill,
    "fp32_big_gemm": w_fp32_big_gemm,
    "sync_item_layer": w_sync_item_layer,
    "sync_bool_mask": w_sync_bool_mask,
    "sync_cpu_print": w_sync_cpu_print,
    "copy_pageable": w_copy_pageable,
    "dataloader": w_dataloader,
    "graph_legal": w_graph_legal,
}
