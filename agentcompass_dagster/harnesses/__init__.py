"""Harnesses: the agent programs under evaluation (oracle, nop; scripted and model-driven agents later)."""
