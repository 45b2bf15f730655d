"""Models: what a harness calls (no model; scripted and OpenAI-compatible later)."""
