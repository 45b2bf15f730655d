"""Benchmarks: task sources with their evaluation (demo, synthetic; HumanEval and Harbor tasks later)."""
