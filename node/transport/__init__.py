"""Transport: how frames and control messages travel between nodes and the coordinator.

``wire`` (the msgpack codec), ``links`` (in-process links and the control interface), ``tcp`` and
``mqtt`` (their networked forms), ``linkmodel`` (sans-IO delay, jitter and rate) and ``shaping``
(the I/O that holds frames until the link model releases them).
"""
