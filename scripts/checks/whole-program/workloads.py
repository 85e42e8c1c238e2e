"""Training and serving steps with a known fix, for kopt's whole-program
suite (#35). Each workload: build() -> (step, fixes), where step() runs one
step and fixes maps a fix's name to the fixed step. Every step is written
as a user would write it; the sync and copy sites sit on known lines."""
import torch
import torch.nn as nn
import torch.nn.functional as F

dev = torch.device("cuda")


def cnn(width=64, blocks=6):
    layers = [nn.Conv2d(3, width, 3, padding=1), nn.ReLU()]
    for _ in range(blocks):
        layers += [nn.Conv2d(width, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU()]
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 10))


class Checked(nn.Module):
    """A CNN that checks each block's output for NaN on the host."""

    def __init__(self, width=64, blocks=8):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.ReLU()) for _ in range(blocks))
        self.head = nn.Linear(width, 10)
        self.check = True

    def forward(self, x):
        x = self.stem(x)
        for b in self.blocks:
            x = b(x)
            if self.check and torch.isnan(x).any().item():  # SYNC: .item() per block
                raise FloatingPointError("NaN")
        return self.head(x.mean((2, 3)))


def item_per_block():
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    m = Checked().to(dev).eval()
    x = torch.randn(32, 3, 64, 64, device=dev)

    def step():
        with torch.inference_mode():
            return m(x)

    def no_check():
        m.check = False
        try:
            with torch.inference_mode():
                return m(x)
        finally:
            m.check = True

    def tf32():
        torch.backends.cudnn.allow_tf32 = True
        try:
            return step()
        finally:
            torch.backends.cudnn.allow_tf32 = False

    return step, {"remove_host_syncs": no_check, "enable_tf32": tf32}


class Routed(nn.Module):
    """Tokens routed by a boolean mask: data-dependent shapes per layer."""

    def __init__(self, d=512, layers=6):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(d, d) for _ in range(layers))
        self.fixed = False

    def forward(self, x):
        for lin in self.layers:
            keep = x.norm(dim=-1) > 0.5
            if self.fixed:
                x = torch.where(keep[:, None], lin(x), x)
            else:
                y = x.clone()
                y[keep] = lin(x[keep])  # SYNC: boolean mask index (nonzero)
                x = y
        return x


def mask_routing():
    m = Routed().to(dev).eval()
    x = torch.randn(4096, 512, device=dev)

    def step():
        with torch.inference_mode():
            return m(x)

    def fixed():
        m.fixed = True
        try:
            return step()
        finally:
            m.fixed = False

    return step, {"remove_host_syncs": fixed}


def train_setup(model, opt_kw, batch=64, shape=(3, 32, 32)):
    model = model.to(dev).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, **opt_kw)
    x = torch.randn(batch, *shape, device=dev)
    y = torch.randint(0, 10, (batch,), device=dev)
    return model, opt, x, y


def loss_logged_mid_step():
    model, opt, x, y = train_setup(cnn(), {})
    log = []

    def step(mid=True):
        loss = F.cross_entropy(model(x), y)
        if mid:
            log.append(loss.item())  # SYNC: .item() before backward
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if not mid:
            log.append(loss.detach())

    return step, {"remove_host_syncs": lambda: step(mid=False)}


def pageable_input():
    model, opt, _, y = train_setup(cnn(width=32, blocks=2), {}, batch=256, shape=(3, 64, 64))
    host = torch.randn(256, 3, 64, 64)
    pinned = host.pin_memory()

    def step(src=host, nb=False):
        x = src.to(dev, non_blocking=nb)  # COPY: input from pageable memory
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, {"pin_host_memory": lambda: step(pinned, True)}


def adam_forloop():
    # Many small parameters: the optimizer's per-parameter kernels dominate.
    model = nn.Sequential(*[nn.Linear(256, 256) for _ in range(24)])
    model, _, _, _ = train_setup(model, {}, shape=(256,))
    x = torch.randn(64, 256, device=dev)
    opts = {
        "forloop": torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False),
        "foreach": torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True),
        "fused": torch.optim.Adam(model.parameters(), lr=1e-3, fused=True),
    }

    def step(kind="forloop"):
        loss = model(x).square().mean()
        loss.backward()
        opts[kind].step()
        opts[kind].zero_grad(set_to_none=True)

    return step, {"fused_optimizer": lambda: step("fused"), "foreach_optimizer": lambda: step("foreach")}


def transformer_fp32():
    layer = nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True, dropout=0.0)
    model = nn.TransformerEncoder(layer, 4).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(32, 128, 512, device=dev)

    def step(tf32=False, bf16=False):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
                loss = model(x).square().mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False

    return step, {"enable_tf32": lambda: step(tf32=True), "bf16_autocast": lambda: step(bf16=True)}


def small_mlp_graph():
    # Launch bound, no sync: graph capture is legal and best.
    model = nn.Sequential(*[nn.Sequential(nn.Linear(128, 128), nn.GELU()) for _ in range(16)]).to(dev).eval()
    x = torch.randn(8, 128, device=dev)
    static = x.clone()
    g = torch.cuda.CUDAGraph()
    with torch.inference_mode():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                model(static)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            model(static)

    def step():
        with torch.inference_mode():
            return model(x)

    def graphed():
        static.copy_(x)
        g.replay()

    return step, {"capture_cuda_graph": graphed}


def cpu_print_per_layer():
    # A serving loop that reads a statistic per layer with .cpu().
    model = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(8)]).to(dev).eval()
    x = torch.randn(256, 1024, device=dev)
    stats = []

    def step(read=True):
        with torch.inference_mode():
            h = x
            for lin in model:
                h = torch.relu(lin(h))
                if read:
                    stats.append(h.amax().cpu())  # SYNC: .cpu() per layer
        return h

    return step, {"remove_host_syncs": lambda: step(False)}


WORKLOADS = {
    "item_per_block": item_per_block,
    "mask_routing": mask_routing,
    "loss_logged_mid_step": loss_logged_mid_step,
    "pageable_input": pageable_input,
    "adam_forloop": adam_forloop,
    "transformer_fp32": transformer_fp32,
    "small_mlp_graph": small_mlp_graph,
    "cpu_print_per_layer": cpu_print_per_layer,
}
