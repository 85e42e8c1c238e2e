"""A program that replays a CUDA graph: a small MLP's forward captured once,
then replayed STEPS times (each replay one cudaGraphLaunch holding several
kernels). `kopt trace -- python3 graph_replay.py` must list those kernels by
name with their own time, not one lump per graph launch.

  python3 graph_replay.py [STEPS]
"""

import sys

import torch


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512), torch.nn.LayerNorm(512)
    ).cuda().eval()
    x = torch.randn(64, 512, device="cuda")
    with torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                net(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = net(x)
        for _ in range(steps):
            graph.replay()
        torch.cuda.synchronize()
    print(f"replayed {steps} times, out {tuple(out.shape)}")


if __name__ == "__main__":
    main()
