"""Output: files written atomically, markdown tables and plots."""
