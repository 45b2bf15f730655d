"""Runtime retries inside one semantic attempt (R-RETRY-1, R-RETRY-2): which errors a retry may take,
how many it may, and which failure sites rerun the whole attempt."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Failure sites whose retry reruns the whole attempt in a new environment with the same plan (R-RETRY-2).
WHOLE_ATTEMPT_SITES = frozenset({"environment", "prepare", "inference", "artifact", "general"})


def retry_matches(error: str | None, patterns: list[str] | None) -> str | None:
    """R-RETRY-1: None matches any non-empty error, a list matches by regex, [] matches nothing.
    Returns the matching pattern ("*" for None), or None when the error is not retryable."""
    if not error:
        return None
    if patterns is None:
        return "*"
    return next((p for p in patterns if re.search(p, error)), None)


@dataclass
class RetryAllowance:
    """max_retries for one semantic attempt, shared by all of its retryable phases."""

    max_retries: int
    patterns: list[str] | None
    used: int = 0

    def take(self, error: str | None) -> str | None:
        if self.used >= self.max_retries:
            return None
        matched = retry_matches(error, self.patterns)
        if matched is not None:
            self.used += 1
        return matched
