"""Runtimes: the control session and every way of running a plan.

In-process, processes, containers, the trio-free engines and the reference model.
"""
