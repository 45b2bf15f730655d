"""Harbor's rewards: what a verifier leaves in /logs/verifier (``reward.txt``, one number; or
``reward.json``, one or more named numbers), read as Harbor's verifier reads them, and the rule that
turns them into this framework's score and correctness.

Reading (Harbor's ``verifier.py``): ``reward.json`` when it exists, an object whose numeric values are
the rewards (others are ignored), with ``reward.txt``'s number added as ``reward`` when the object has
no ``reward`` of its own; else ``reward.txt``. An empty file, text that is not a finite number, or JSON
that is not an object with a number in it is no reward: the verifier gave no verdict.

Correctness (Harbor counts a trial as passed when its one reward is 1, ``pass_at_k.py``): the deciding
reward is the one named by the benchmark's ``reward_key``, else ``reward``, else the only one; the score
is that reward and the attempt is correct when it reaches ``pass_threshold`` (1 unless declared). With
several rewards and none of them deciding, the score is their mean and the attempt is correct when every
one reaches the threshold.
"""

from __future__ import annotations

import json
import math

# A reward is a number or a small object; a file larger than this is not one (the agent can make the
# verifier's output any size).
MAX_REWARD_BYTES = 1 << 16


def parse_rewards(reward_json: bytes | None, reward_txt: bytes | None) -> tuple[dict[str, float] | None, str]:
    """The rewards of the two files' contents (None: that file is absent), or None and why there are none."""
    if reward_json is not None:
        text = reward_json.decode(errors="replace").strip()
        if not text:
            return None, "reward.json is empty"
        try:
            parsed = json.loads(text)
        except ValueError:
            return None, f"reward.json holds {text[:80]!r}, not JSON"
        if not isinstance(parsed, dict):
            return None, f"reward.json holds {text[:80]!r}, not an object of named rewards"
        rewards = {
            key: float(value)
            for key, value in parsed.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        }
        if "reward" not in rewards and reward_txt is not None:
            scalar, _ = _number(reward_txt)
            if scalar is not None:
                rewards["reward"] = scalar
        if not rewards:
            return None, f"reward.json holds {text[:80]!r}: no finite number in it"
        return rewards, ""
    if reward_txt is not None:
        scalar, problem = _number(reward_txt)
        return ({"reward": scalar}, "") if scalar is not None else (None, problem)
    return None, "no /logs/verifier/reward.txt or reward.json"


def _number(data: bytes) -> tuple[float | None, str]:
    text = data.decode(errors="replace").strip()
    if not text:
        return None, "reward.txt is empty"
    try:
        value = float(text)
    except ValueError:
        return None, f"reward.txt holds {text[:80]!r}, not a number"
    if not math.isfinite(value):
        return None, f"reward.txt holds {text[:80]!r}, not a finite number"
    return value, ""


def verdict(rewards: dict[str, float], reward_key: str | None, threshold: float) -> tuple[bool, float]:
    """(correct, score) of one attempt's rewards, by the rule in this module's docstring."""
    key = reward_key or ("reward" if "reward" in rewards else next(iter(rewards)) if len(rewards) == 1 else None)
    if key is not None:
        value = rewards.get(key, 0.0)
        return value >= threshold, value
    return all(v >= threshold for v in rewards.values()), sum(rewards.values()) / len(rewards)


def combine(steps: list[dict[str, float] | None], strategy: str) -> dict[str, float] | None:
    """A multi-step task's rewards from its steps' (in order; None: that step's verifier gave none).
    ``final``: the last step's. ``mean``: each name's mean over the steps (a missing name counts 0), as
    Harbor computes it, except that a step whose verifier gave no reward counts 0 for every name instead
    of leaving the mean: the agent's work left the verifier without a verdict, a failure it must not
    gain by."""
    if not steps:
        return None
    if strategy == "final":
        return steps[-1]
    names = sorted({name for rewards in steps if rewards for name in rewards})
    if not names:
        return None
    return {name: sum((rewards or {}).get(name, 0.0) for rewards in steps) / len(steps) for name in names}


def short_of(rewards: dict[str, float] | None, minimum: float | dict[str, float]) -> str | None:
    """Why a step's rewards fall short of its ``min_reward`` (a number gates ``reward``, an object each of
    its names; a missing reward is below any minimum), or None when they do not."""
    wanted = {"reward": minimum} if isinstance(minimum, (int, float)) else minimum
    for name, least in wanted.items():
        got = (rewards or {}).get(name)
        if got is None or got < least:
            return f"{name}={got} below min_reward {least}"
    return None
