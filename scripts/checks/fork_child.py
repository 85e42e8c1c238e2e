"""A CUDA program that forks a child which exits normally (as a C program or
a plain os.fork() child does): the child inherits kopt's exit handler but
not CUPTI. Used to check that `kopt trace` neither hangs nor spoils the
parent's trace.   kopt trace -- python3 scripts/checks/fork_child.py"""
import os
import sys

import torch

x = torch.ones(1024, device="cuda")
torch.cuda.synchronize()
pid = os.fork()
if pid == 0:
    sys.exit(0)  # the child never touches CUDA
os.waitpid(pid, 0)
for _ in range(10):
    x = x * 2
torch.cuda.synchronize()
print("parent ok", float(x[0]))
