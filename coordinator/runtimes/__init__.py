"""Runtimes: the control session and every way of running a plan.

In-process, processes, containers, the trio-free engines and the reference model.
"""

from pathlib import Path

from node import check_build

check_build(Path(__file__).resolve().parent.parent)  # `make compiled` compiles the flit-level model too
