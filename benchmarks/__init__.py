"""Speed and memory measurements (plain scripts): ``python -m benchmarks <name>``."""
