"""Runtimes: the control session and every way of running a plan (in-process, processes, containers, engines, model)."""
