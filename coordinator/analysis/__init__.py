"""Analysis: metrics over arrival records, timing models, result documents."""
