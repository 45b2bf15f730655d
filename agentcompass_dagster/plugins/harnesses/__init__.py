"""Harnesses: the agent programs under evaluation (oracle, nop, scripted, completions, and the
model-driven tool_agent and miniswe); the contract is ``contracts.harness.Harness``. May import the contracts, the
declarations, the store, the durable layer, the gateway and the models."""
