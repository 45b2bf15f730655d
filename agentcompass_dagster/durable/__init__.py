"""Durable long runs: activity log, checkpoints, resume, fork, replay."""
