"""Benchmarks: task sources with their evaluation (demo, humaneval, harbor, synthetic); the contract is
``contracts.benchmark.Benchmark``. May import the contracts, the declarations, the run
directory's store and the other plugins."""
