"""Runtimes: the control session and the ways to run a plan (in-process, processes, containers, engines, model)."""
