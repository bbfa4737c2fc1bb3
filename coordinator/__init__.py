"""meshcast coordinator: plans, runtimes, reference model, metrics, reports and CLI."""
