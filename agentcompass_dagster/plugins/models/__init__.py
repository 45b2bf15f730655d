"""Models: what a harness calls (none, scripted, openai_compat); the contract is ``contracts.model.Model``. May import
the contracts and the run directory's store."""
