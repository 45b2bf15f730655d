"""Harnesses: the agent programs under evaluation (oracle, nop, scripted, completions, and the
model-driven tool_agent and miniswe); the contract is ``contracts.harness.Harness``."""
