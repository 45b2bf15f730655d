"""The run directory and its records: layout and names, atomic and symlink-safe writes, redaction, the
run store that finds and reuses earlier runs."""
