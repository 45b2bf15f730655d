"""The fake agent CLIs of tests/agents as ``cli_agent`` declarations, with a directory of packages to
mount into their environments: the two scripts and the ``openai`` and ``anthropic`` SDKs with everything
they need, copied from this Python's site-packages (the environments' python3 is the same minor version),
as a team would ship its own agent offline."""

from __future__ import annotations

import re
import shutil
from importlib.metadata import Distribution, PackageNotFoundError, distribution
from pathlib import Path
from typing import Any

AGENTS = Path(__file__).resolve().parent / "agents"
SDKS = ["openai", "anthropic"]
# Each fake agent: the API it speaks, how it runs, and the variables that point its SDK at the gateway.
FAKE_AGENTS: dict[str, dict[str, Any]] = {
    "fake-chat": {
        "api": "chat_completions",
        "script": "fake_openai_agent.py",
        "argument": "chat",
        "env": {"OPENAI_BASE_URL": "{gateway_url}/v1", "OPENAI_API_KEY": "{token}"},
    },
    "fake-responses": {
        "api": "responses",
        "script": "fake_openai_agent.py",
        "argument": "responses",
        "env": {"OPENAI_BASE_URL": "{gateway_url}/v1", "OPENAI_API_KEY": "{token}"},
    },
    "fake-anthropic": {
        "api": "anthropic_messages",
        "script": "fake_anthropic_agent.py",
        "argument": "",
        "env": {"ANTHROPIC_BASE_URL": "{gateway_url}", "ANTHROPIC_API_KEY": "{token}"},
    },
}


def _closure(names: list[str]) -> list[Distribution]:
    found: dict[str, Distribution] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key in found:
            continue
        try:
            found[key] = dist = distribution(name)
        except PackageNotFoundError:
            continue
        todo += [re.match(r"[A-Za-z0-9_.\-]+", r)[0] for r in dist.requires or [] if "extra ==" not in r]  # type: ignore[index]
    return list(found.values())


def agent_packages(directory: Path) -> Path:
    """``directory`` filled with the fake agents and their SDKs."""
    for dist in _closure(SDKS):
        for file in dist.files or []:
            source = Path(str(dist.locate_file(file)))
            if ".." not in file.parts and source.is_file():
                (directory / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, directory / file)
    for script in AGENTS.glob("fake_*_agent.py"):
        shutil.copy2(script, directory / script.name)
    directory.chmod(0o755)  # mounted for the environment's unprivileged user
    return directory


def fake_agent(name: str, packages: Path) -> dict[str, Any]:
    """The inline harness declaration of one fake agent."""
    agent = FAKE_AGENTS[name]
    return {
        "id": name,
        "provider": "cli_agent",
        "params": {
            "api": agent["api"],
            "packages": str(packages),
            "install": [f'cp "$AGENTCOMPASS_PACKAGES/{agent["script"]}" "$AGENTCOMPASS_AGENT_DIR/"'],
            "run": f'PYTHONPATH="$AGENTCOMPASS_PACKAGES" python3 "$AGENTCOMPASS_AGENT_DIR/{agent["script"]}" '
            f"{agent['argument']}",
            "env": {**agent["env"], "AGENT_MODEL": "{model}"},
            "logs": ["$HOME/.fake-agent"],
        },
    }
