"""Models: what a harness calls (none, scripted, openai_compat); the contract is ``contracts.model.Model``."""
