"""Bare per-step times, interleaved rounds, CUDA events; one JSON line.

  python3 measure.py bn BATCH        ResNet-50 eager vs batch norm folded
                                     into the convolutions, vs channels_last,
                                     vs both
  python3 measure.py compile_resnet BATCH   ResNet-50 eager vs channels_last vs
                                     torch.compile with freezing (both layouts)
  python3 measure.py graph BATCH     ResNet-50 eager vs CUDA-graph replay
  python3 measure.py compile [VOCAB] GPT-2 prefill (bf16, 8 x 512) eager vs
                                     torch.compile (default mode); VOCAB
                                     50304 = padded, so compile's gain is
                                     not the padding Inductor does itself
  python3 measure.py steps BATCH N   N ResNet-50 steps, each in an NVTX
                                     "step" range (for kopt trace)
"""

import copy
import json
import sys

import torch

torch.backends.cudnn.benchmark = True


def step_ms(fn, steps):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(steps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / steps


def rounds(variants, steps, n=5):
    """Median per-step ms of each variant over n interleaved rounds."""
    for fn in variants.values():
        for _ in range(5):
            fn()
    rs = [{k: step_ms(fn, steps) for k, fn in variants.items()} for _ in range(n)]
    return {k: sorted(r[k] for r in rs)[n // 2] for k in variants}, rs


def resnet(batch):
    import torchvision

    m = torchvision.models.resnet50(weights=None).to("cuda", torch.bfloat16).eval()
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=torch.bfloat16)
    return m, x


def fold_bn(model):
    """A copy of a torchvision ResNet with every batch norm folded into the
    convolution before it (eval mode: running statistics are constants)."""
    m = copy.deepcopy(model)

    def fold(conv, bn):
        scale = bn.weight.float() / torch.sqrt(bn.running_var.float() + bn.eps)
        w = conv.weight
        conv.weight = torch.nn.Parameter((w.float() * scale.view(-1, 1, 1, 1)).to(w.dtype))
        b = conv.bias.float() if conv.bias is not None else torch.zeros_like(scale)
        conv.bias = torch.nn.Parameter(((b - bn.running_mean.float()) * scale + bn.bias.float()).to(w.dtype))

    fold(m.conv1, m.bn1)
    m.bn1 = torch.nn.Identity()
    for layer in (m.layer1, m.layer2, m.layer3, m.layer4):
        for blk in layer:
            for i in (1, 2, 3):
                fold(getattr(blk, f"conv{i}"), getattr(blk, f"bn{i}"))
                setattr(blk, f"bn{i}", torch.nn.Identity())
            if blk.downsample is not None:
                fold(blk.downsample[0], blk.downsample[1])
                blk.downsample[1] = torch.nn.Identity()
    return m


def bn(batch):
    m, x = resnet(batch)
    folded = fold_bn(m)
    left = sum(isinstance(t, torch.nn.BatchNorm2d) for t in folded.modules())
    cl = torch.channels_last
    x_cl = x.to(memory_format=cl)
    m_cl = copy.deepcopy(m).to(memory_format=cl)
    folded_cl = fold_bn(m).to(memory_format=cl)
    with torch.inference_mode():
        ref = m(x).float()
        err = (ref - folded(x).float()).abs().max().item()
        scale = ref.abs().max().item()
        med, rs = rounds(
            {
                "eager": lambda: m(x),
                "folded": lambda: folded(x),
                "channels_last": lambda: m_cl(x_cl),
                "channels_last_folded": lambda: folded_cl(x_cl),
            },
            10,
        )
    return {
        "case": f"resnet50_b{batch}_bn",
        "step_ms": med,
        "speedup": med["eager"] / med["folded"],
        "speedup_channels_last": med["eager"] / med["channels_last"],
        "speedup_both": med["eager"] / med["channels_last_folded"],
        "batch_norms_left": left,
        "max_abs_diff": err,
        "max_abs_output": scale,
        "rounds": rs,
    }


def compile_resnet(batch):
    """ResNet-50 eager vs channels_last vs torch.compile with freezing (batch
    norm folded into the convolutions and the bias in their epilogue), NCHW
    and channels_last."""
    import torch._inductor.config as inductor

    m, x = resnet(batch)
    cl = torch.channels_last
    m_cl, x_cl = copy.deepcopy(m).to(memory_format=cl), x.to(memory_format=cl)
    inductor.freezing = True
    c = torch.compile(copy.deepcopy(m))
    c_cl = torch.compile(copy.deepcopy(m).to(memory_format=cl))
    with torch.inference_mode():
        for _ in range(3):
            c(x)
            c_cl(x_cl)
        med, rs = rounds(
            {
                "eager": lambda: m(x),
                "channels_last": lambda: m_cl(x_cl),
                "compiled_frozen": lambda: c(x),
                "compiled_frozen_channels_last": lambda: c_cl(x_cl),
            },
            10,
        )
    return {"case": f"resnet50_b{batch}_compile", "step_ms": med, "rounds": rs}


def graph(batch):
    m, x = resnet(batch)
    with torch.inference_mode():
        # Eager alone first: does capturing a graph change the eager step?
        before, _ = rounds({"eager": lambda: m(x)}, 50)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                m(x)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            m(x)
        med, rs = rounds({"eager": lambda: m(x), "graph": g.replay}, 50)
    return {"case": f"resnet50_b{batch}_graph", "step_ms": med, "eager_before_capture_ms": before["eager"], "speedup": med["eager"] / med["graph"], "rounds": rs}


def compile_gpt2(vocab=50257):
    from transformers import GPT2Config, GPT2LMHeadModel

    m = GPT2LMHeadModel(GPT2Config(vocab_size=vocab)).to("cuda", torch.bfloat16).eval()
    ids = torch.randint(0, 50257, (8, 512), device="cuda")
    c = torch.compile(m)
    with torch.inference_mode():
        for _ in range(3):
            c(input_ids=ids)
        med, rs = rounds({"eager": lambda: m(input_ids=ids), "compiled": lambda: c(input_ids=ids)}, 20)
    return {"case": f"gpt2_compile_vocab{vocab}", "step_ms": med, "speedup": med["eager"] / med["compiled"], "rounds": rs}


def steps(batch, n):
    m, x = resnet(batch)
    with torch.inference_mode():
        for _ in range(n):
            torch.cuda.nvtx.range_push("step")
            m(x)
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "bn":
        print(json.dumps(bn(int(sys.argv[2]))))
    elif what == "compile_resnet":
        print(json.dumps(compile_resnet(int(sys.argv[2]))))
    elif what == "graph":
        print(json.dumps(graph(int(sys.argv[2]))))
    elif what == "steps":
        steps(int(sys.argv[2]), int(sys.argv[3]))
    elif what == "compile":
        print(json.dumps(compile_gpt2(int(sys.argv[2]) if len(sys.argv) > 2 else 50257)))
    else:
        raise SystemExit(__doc__)
