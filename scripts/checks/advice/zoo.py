"""The advice suite's models (random weights, built from configs, no
download): name -> (model on `device`, inputs, facts), and the candidate
fixes that apply to each. Shared by measure.py, app.py and module.py.

Names: FAMILY_bBATCH[_sSEQ]_DTYPE[_LAYOUT|_eager]. Batch 1 (or a tiny
recurrent step) is launch bound; the large batches are GPU bound.
"""

import copy
import os

import torch

torch.backends.cudnn.benchmark = True

MODELS = [
    "resnet50_b1_fp32",
    "resnet50_b128_bf16",
    "bert_b32_s128_fp32",
    "vit_hf_b64_bf16_eager",
    "gpt2_b4_s1024_bf16_eager",
    "lstm_b64_s256_fp32",
    "vit_tv_b32_fp32",
    "mobilenetv3_b128_fp32",
    "bert_b1_s64_bf16",
    "efficientnet_b8_bf16_cl",
    "lstmcell_b16_fp32",
    "gpt2_b1_s128_fp32",
]


def family(name):
    return name.split("_")[0]


def parse(name):
    parts = name.split("_")
    f = {"family": parts[0], "eager_attn": "eager" in parts, "channels_last": "cl" in parts}
    for p in parts:
        if p.startswith("b") and p[1:].isdigit():
            f["batch"] = int(p[1:])
        if p.startswith("s") and p[1:].isdigit():
            f["seq"] = int(p[1:])
        if p in ("fp32", "bf16"):
            f["dtype"] = p
    return f


def _dtype(f):
    return torch.bfloat16 if f["dtype"] == "bf16" else torch.float32


class HF(torch.nn.Module):
    """A Hugging Face model returning one tensor."""

    def __init__(self, m, key):
        super().__init__()
        self.m, self.key = m, key

    def forward(self, x):
        out = self.m(x)
        return getattr(out, self.key)


def _hf(f, impl, vocab=None):
    import transformers as tr

    torch.manual_seed(0)
    fam = f["family"]
    if fam == "bert":
        cfg, cls, key = tr.BertConfig(), tr.BertModel, "last_hidden_state"
    elif fam == "gpt2":
        cfg, cls, key = tr.GPT2Config(), tr.GPT2LMHeadModel, "logits"
        if vocab:
            cfg.vocab_size = vocab
    else:  # vit
        cfg, cls, key = tr.ViTConfig(), tr.ViTModel, "last_hidden_state"
    try:
        m = cls._from_config(cfg, attn_implementation=impl)
    except Exception:  # noqa: BLE001 - older or newer transformers
        cfg._attn_implementation = impl
        m = cls(cfg)
    return HF(m, key)


def build_inputs(name, device="cpu"):
    """The inputs alone (a module script's get_inputs)."""
    f = parse(name)
    dt, b, fam = _dtype(f), f["batch"], f["family"]
    if fam in ("resnet50", "mobilenetv3", "efficientnet", "vit"):
        x = torch.randn(b, 3, 224, 224, device=device, dtype=dt)
        if f["channels_last"]:
            x = x.contiguous(memory_format=torch.channels_last)
        return [x]
    if fam in ("bert", "gpt2"):
        return [torch.randint(0, 30000, (b, f["seq"]), device=device)]
    if fam == "lstm":
        return [torch.randn(b, f["seq"], 512, device=device, dtype=dt)]
    return [torch.randn(b, 64, 256, device=device, dtype=dt)]


def build(name, device="cuda", variant=None):
    """The model in eval mode and its inputs. variant: None (as shipped),
    'sdpa' (HF attention through SDPA), 'pad' (vocabulary padded to a
    multiple of 64)."""
    f = parse(name)
    dt = _dtype(f)
    fam = f["family"]
    b = f["batch"]
    torch.manual_seed(0)
    if fam in ("resnet50", "mobilenetv3", "efficientnet"):
        import torchvision

        ctor = {
            "resnet50": torchvision.models.resnet50,
            "mobilenetv3": torchvision.models.mobilenet_v3_large,
            "efficientnet": torchvision.models.efficientnet_b0,
        }[fam]
        m = ctor(weights=None).eval().to(device, dt)
        x = torch.randn(b, 3, 224, 224, device=device, dtype=dt)
        if f["channels_last"]:
            m = m.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        return m, [x]
    if fam == "vit" and "tv" in name:
        import torchvision

        m = torchvision.models.vit_b_16(weights=None)
        # torchvision zero-initialises the classifier head: every output
        # would be 0 whatever the body computes. A random head makes the
        # outputs depend on the whole model.
        torch.nn.init.normal_(m.heads.head.weight, std=0.02)
        torch.nn.init.normal_(m.heads.head.bias, std=0.02)
        m = m.eval().to(device, dt)
        return m, [torch.randn(b, 3, 224, 224, device=device, dtype=dt)]
    if fam in ("bert", "gpt2", "vit"):
        impl = "eager" if f["eager_attn"] else "sdpa"
        if variant == "sdpa":
            impl = "sdpa"
        vocab = 50304 if variant == "pad" else None
        m = _hf(f, impl, vocab).eval().to(device, dt)
        if fam == "vit":
            x = torch.randn(b, 3, 224, 224, device=device, dtype=dt)
        else:
            x = torch.randint(0, 30000, (b, f["seq"]), device=device)
        return m, [x]
    if fam == "lstm":
        m = LSTM().eval().to(device, dt)
        return m, [torch.randn(b, f["seq"], 512, device=device, dtype=dt)]
    if fam == "lstmcell":
        m = CellLoop().eval().to(device, dt)
        return m, [torch.randn(b, 64, 256, device=device, dtype=dt)]
    raise SystemExit(f"unknown model {name}")


class LSTM(torch.nn.Module):
    """Two cuDNN LSTM layers and a projection (a sequence encoder)."""

    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(512, 1024, num_layers=2, batch_first=True)
        self.proj = torch.nn.Linear(1024, 512)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.proj(y)


class CellLoop(torch.nn.Module):
    """An LSTM cell stepped in Python over 64 time steps (a decoder loop)."""

    def __init__(self):
        super().__init__()
        self.cell = torch.nn.LSTMCell(256, 256)
        self.out = torch.nn.Linear(256, 256)

    def forward(self, x):
        h = torch.zeros(x.shape[0], 256, device=x.device, dtype=x.dtype)
        c = torch.zeros_like(h)
        outs = []
        for t in range(x.shape[1]):
            h, c = self.cell(x[:, t], (h, c))
            outs.append(self.out(h))
        return torch.stack(outs, 1)


def fixes(name):
    """The candidate fixes that apply to this model."""
    f = parse(name)
    out = ["graph"]
    if f["family"] in ("resnet50", "mobilenetv3", "efficientnet"):
        if not f["channels_last"]:
            out.append("channels_last")
        out.append("bn_fold")
    if f["dtype"] == "fp32":
        out += ["tf32", "bf16_autocast"]
    if f["eager_attn"]:
        out.append("sdpa")
    if f["family"] == "gpt2":
        out.append("pad")
    return out


def fold_bn(model):
    """Batch norm folded into the convolution before it (torch.fx)."""
    from torch.fx.experimental.optimization import fuse

    return fuse(copy.deepcopy(model))


def env_model():
    return os.environ.get("ADVICE_MODEL", MODELS[0])
