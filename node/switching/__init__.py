"""Switching: what a node does with a packet between its links, as sans-IO engines.

``engine`` (store-and-forward), ``wormhole`` (flit-level, with virtual channels), ``lockstep`` (the
one lockstep driver that steps either engine) and ``factory`` (the engine a node's settings ask for).
"""
