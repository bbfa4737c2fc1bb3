"""meshcast node: topology, wire format, routing rules and the trio actor of one router."""
