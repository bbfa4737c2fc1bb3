"""Synchronisation: how nodes agree on the logical clock's steps.

``polled`` (the await-free in-process step), ``barrier`` (a node's end of the coordinator-led step
barrier), ``shard`` and ``shardstep`` (a block of node actors in one OS process and the step
agreement between such processes). The sans-IO lockstep driver they all run is
``node.switching.lockstep``.
"""
