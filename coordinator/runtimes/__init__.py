"""Runtimes: the control session and every way to run a plan (in-process, processes, containers, engines, model)."""
