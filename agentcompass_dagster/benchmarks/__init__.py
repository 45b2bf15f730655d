"""Benchmarks: task sources with their evaluation (demo, humaneval, harbor, synthetic); the contract is
``contracts.benchmark.Benchmark``."""
