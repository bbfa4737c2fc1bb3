"""Workloads: injection plans, mcast(n, d, c) message sets and traffic sources."""
