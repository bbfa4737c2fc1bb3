"""Runtimes: the control session and each way to run a plan (in-process, processes, containers, engines)."""
