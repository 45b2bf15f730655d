"""The tokens the gateway admits, each mapped to its attempt's Answer, and the rate each may call at.

A token is looked up by its sha256, and the stored token compared with ``hmac.compare_digest``: how long
a refusal takes says nothing about how close a guess was.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field

from agentcompass_dagster.gateway.calls import Answer


@dataclass
class _Bucket:
    """A token bucket: ``rate`` calls a second on average, bursts of up to ``capacity``."""

    rate: float
    capacity: float
    level: float
    stamp: float = field(default_factory=time.monotonic)

    def take(self) -> float:
        """0 when a call may go now (and takes it), else the seconds until one may."""
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.level >= 1:
            self.level -= 1
            return 0.0
        return (1 - self.level) / self.rate


@dataclass
class Admission:
    """One admitted token: its Answer, its rate bucket, and the lock that keeps its calls one at a time
    (a second call waits for the first: the attempt's turns stay in the order the agent sent them)."""

    token: str
    answer: Answer
    model: str
    bucket: _Bucket
    turn: asyncio.Lock = field(default_factory=asyncio.Lock)


class Admissions:
    """The admitted tokens."""

    def __init__(self, max_calls_per_s: float) -> None:
        self._rate = max_calls_per_s
        self._by_hash: dict[bytes, Admission] = {}

    def admit(self, answer: Answer, model: str) -> str:
        token = secrets.token_urlsafe(32)
        capacity = max(1.0, self._rate)
        self._by_hash[_hash(token)] = Admission(token, answer, model, _Bucket(self._rate, capacity, capacity))
        return token

    def forget(self, token: str) -> None:
        self._by_hash.pop(_hash(token), None)

    def find(self, presented: str | None) -> Admission | None:
        """The admission of ``presented``, None for a token never admitted or forgotten."""
        if not presented:
            return None
        found = self._by_hash.get(_hash(presented))
        if found is None or not hmac.compare_digest(found.token.encode(), presented.encode()):
            return None
        return found

    def clear(self) -> None:
        self._by_hash.clear()


def _hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()
