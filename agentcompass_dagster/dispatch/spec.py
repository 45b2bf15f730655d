"""The dispatch spec (SPEC.yaml) and what it resolves to: every reference read and every plugin built
before anything runs, each problem a one-line error naming the field."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator

from agentcompass_dagster.declarations import registry
from agentcompass_dagster.contracts.declarations import EnvironmentConfig, ModelConfig
from agentcompass_dagster.contracts.validation import validate_declaration
from agentcompass_dagster.contracts.environment import Environment
from agentcompass_dagster.contracts.model import Model
from agentcompass_dagster.dispatch.evidence import has_secret
from agentcompass_dagster.contracts.errors import UserError, field_error
from agentcompass_dagster.plugins.harnesses.tool_agent import ToolAgentParams
from agentcompass_dagster.declarations.references import load_yaml, resolve_reference
from agentcompass_dagster.runtime.execution.plugins import construct_plugin, register_declared_secrets
from agentcompass_dagster.contracts.records import AgentLimits, ExecutionPlan

TASK_ID = "dispatch"
_RUN_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def _reference_form(value: Any) -> str:
    return "id" if isinstance(value, str) else "inline"


# Declared by id or inline; the discriminator makes a bad inline declaration report only its own fields.
ModelRef = Annotated[Annotated[str, Tag("id")] | Annotated[ModelConfig, Tag("inline")], Discriminator(_reference_form)]
EnvironmentRef = Annotated[
    Annotated[str, Tag("id")] | Annotated[EnvironmentConfig, Tag("inline")], Discriminator(_reference_form)
]


class DispatchSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str | None = None
    prompt: str = Field(min_length=1)
    system_prompt: str | None = None
    files: Path | None = None
    model: ModelRef
    environment: EnvironmentRef = "local"
    agent: ToolAgentParams = Field(default_factory=lambda: ToolAgentParams(checkpoints=False))
    limits: AgentLimits = Field(default_factory=AgentLimits)
    output_schema: Path | None = None
    # Beside the sweeps' results, which are git-ignored, not loose in the working directory.
    runs_dir: Path = Path("results/dispatch")

    @field_validator("agent", mode="before")
    @classmethod
    def _agent_params(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        if "system_prompt" in value:
            raise ValueError("declare the system prompt once, as the top-level system_prompt")
        # A dispatch never resumes: checkpoints would only copy the working dir (and any secret in it)
        # beside the transcript.
        return {"checkpoints": False, **value}


@dataclass
class ResolvedSpec:
    """A spec with every reference resolved and every plugin built: nothing left to fail on input."""

    spec: DispatchSpec
    text: str
    sha256: str
    model_config: ModelConfig
    model: Model
    environment: Environment
    plan: ExecutionPlan
    params: ToolAgentParams
    files: Path | None
    schema: Any
    schema_id: str | None


def run_id_problem(run_id: str) -> str | None:
    if not _RUN_ID.fullmatch(run_id):
        return "use only ASCII letters, digits, '.', '_' and '-', at most 64 characters"
    if run_id in (".", ".."):
        return "must name a directory of its own, not '.' or '..'"
    return None


def new_run_id() -> str:
    return f"dispatch-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def _load_schema(spec: DispatchSpec, base: Path, where: str) -> tuple[Any, str | None]:
    """The schema and its id: its ``$id``, else the digest of the file, so the receipt pins the content."""
    if spec.output_schema is None:
        return None, None
    declared = str(spec.output_schema)
    path = base / spec.output_schema
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise field_error("output_schema", declared, f"no such file {path}", where) from None
    except OSError as exc:
        raise field_error("output_schema", declared, f"cannot read {path}: {exc.strerror}", where) from None
    try:
        schema = json.loads(raw)
        Draft202012Validator.check_schema(schema)
    except ValueError as exc:
        raise field_error("output_schema", declared, f"{path} is not JSON: {exc}", where) from None
    except SchemaError as exc:
        raise field_error(
            "output_schema", declared, f"not a valid JSON Schema (Draft 2020-12): {exc.message}", where
        ) from None
    declared_id = schema.get("$id") if isinstance(schema, dict) else None
    return schema, declared_id if isinstance(declared_id, str) else f"sha256:{hashlib.sha256(raw).hexdigest()}"


def _model_config(spec: DispatchSpec, root: Path, where: str) -> ModelConfig:
    """The model declared inline or by id under ``root``: one a dispatch can call."""
    model_config = (
        spec.model
        if isinstance(spec.model, ModelConfig)
        else validate_declaration(
            ModelConfig, resolve_reference(root, "models", spec.model, "model", where)[0], f"{where}: model"
        )
    )
    if model_config.provider == "none":
        raise field_error("model.provider", model_config.provider, "a dispatch needs a model it can call", where)
    return model_config


def _environment_config(spec: DispatchSpec, root: Path, where: str) -> EnvironmentConfig:
    """The environment declared inline or by id under ``root``."""
    if isinstance(spec.environment, EnvironmentConfig):
        return spec.environment
    return validate_declaration(
        EnvironmentConfig,
        resolve_reference(root, "environments", spec.environment, "environment", where)[0],
        f"{where}: environment",
    )


def _plan(
    spec: DispatchSpec, model_config: ModelConfig, env_config: EnvironmentConfig, environment: Environment
) -> ExecutionPlan:
    """The dispatch's one attempt, under the spec's limits and the environment's default network policies."""
    return ExecutionPlan(
        task_id=TASK_ID,
        attempt=1,
        benchmark_id="dispatch",
        harness_id="tool_agent",
        environment_id=env_config.id,
        model_id=model_config.id,
        agent_limits=spec.limits,
        baseline_network_policy=environment.default_policy("baseline"),
        run_network_policy=environment.default_policy("run"),
        evaluation_network_policy=environment.default_policy("evaluation"),
    )


def load_spec(path: Path) -> ResolvedSpec:
    """Validate the spec and build what it names; every problem is a one-line UserError."""
    where = str(path)
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise UserError(f"{where}: expected a mapping of dispatch fields, got {type(data).__name__}")
    spec = validate_declaration(DispatchSpec, data, where)
    raw = path.read_bytes()
    base = path.resolve().parent
    root = base.parent if base.name == "dispatch" else base
    model_config = _model_config(spec, root, where)
    env_config = _environment_config(spec, root, where)
    register_declared_secrets(env_config.env, env_config, model_config)
    environment = construct_plugin(
        f"environment {env_config.id!r}",
        registry.environments.get(env_config.provider_id, "environment.provider"),
        env_config,
    )
    plan = _plan(spec, model_config, env_config, environment)
    environment.validate_plan(plan)
    files = base / spec.files if spec.files is not None else None
    if files is not None and not files.is_dir():
        raise field_error("files", str(spec.files), f"{files} is not a directory", where)
    schema, schema_id = _load_schema(spec, base, where)
    params = (
        spec.agent
        if spec.system_prompt is None
        else spec.agent.model_copy(update={"system_prompt": spec.system_prompt})
    )
    return ResolvedSpec(
        spec=spec,
        text=raw.decode(errors="replace"),
        sha256=hashlib.sha256(raw).hexdigest(),
        model_config=model_config,
        model=construct_plugin(
            f"model {model_config.id!r}", registry.models.get(model_config.provider, "model.provider"), model_config
        ),
        environment=environment,
        plan=plan,
        params=params,
        files=files,
        schema=schema,
        schema_id=schema_id,
    )


def refuse_secrets(resolved: ResolvedSpec, where: str) -> None:
    """Before any model call: the error names the field, never the value."""
    for field, text in (("system_prompt", resolved.params.system_prompt), ("prompt", resolved.spec.prompt)):
        if has_secret(text):
            raise UserError(
                f"{where}: {field}: holds what looks like a secret (API key, token, password or "
                "private key); it is never sent to a model: remove it"
            )
