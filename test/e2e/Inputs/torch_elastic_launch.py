"""Starts a program on N local ranks with PyTorch's elastic launcher, as
`torchrun --standalone --nproc_per_node N --no_python PROGRAM ARGS...` does
(Debian 12's torchrun command fails on Python 3.11 before it starts
anything, so the launcher's API is called directly).

Usage: torch_elastic_launch.py N PROGRAM ARGS...
Prints "launcher: every rank exited 0" or "launcher: a rank failed".
"""
import sys

from torch.distributed.elastic.multiprocessing import Std
from torch.distributed.launcher.api import LaunchConfig, elastic_launch

config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=int(sys.argv[1]),
                      run_id="tessera", rdzv_backend="c10d",
                      rdzv_endpoint="localhost:0", max_restarts=0,
                      redirects=Std.NONE, tee=Std.NONE, monitor_interval=0.2)
try:
    elastic_launch(config, sys.argv[2])(*sys.argv[3:])
    print("launcher: every rank exited 0")
except Exception:  # ChildFailedError, with its own report on stderr
    print("launcher: a rank failed")
