"""What a declaration refers to: its YAML file, read with one-line errors; a name in a sweep, resolved to
the declaration file of that name or to a plugin; the plugins a sweep names, checked against the registries;
the files a declaration written out by the framework was read from."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from agentcompass_dagster.contracts.errors import UserError, did_you_mean

if TYPE_CHECKING:
    from agentcompass_dagster.declarations.sweep import SweepConfig

DEFAULT_RESOURCES = Path("resources")
# The declarations shipped with the package (a link to the repository's resources/): what a directory
# without resources/ of its own runs and shows, whichever directory `dagster dev` was started from.
PACKAGED_RESOURCES = Path(__file__).resolve().parents[1] / "resources"


def default_resources() -> Path:
    """The declarations a name resolves in after the sweep's own: ./resources, else the package's."""
    return DEFAULT_RESOURCES if (DEFAULT_RESOURCES / "sweeps").is_dir() else PACKAGED_RESOURCES


def load_yaml(path: Path) -> Any:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{path}{at}: invalid YAML: {problem}") from None


def resolve_reference(roots: Path | list[Path], kind: str, ref: Any, field: str, where: str) -> tuple[Any, str | None]:
    """A string names a declaration <root>/<kind>/<name>.yaml (the first root holding it wins); a harness or
    environment may also be a bare plugin id or ``package.module:Class``, with its defaults. Else one line,
    with the nearest name. Returned with the file it was read from (None: not read from a file of its own)."""
    if not isinstance(ref, str):
        return ref, None
    roots = [roots] if isinstance(roots, Path) else roots
    resolved = [Path(root).resolve() for root in roots]  # each root once, in the order given
    paths = [Path(root) / kind / f"{ref}.yaml" for i, root in enumerate(roots) if resolved.index(resolved[i]) == i]
    for path in paths:
        if path.is_file():
            data = load_yaml(path)
            if not isinstance(data, dict):
                raise UserError(f"{path}: expected a mapping of fields, got {type(data).__name__}")
            return data, str(path)
    declared = sorted({other.stem for path in paths for other in path.parent.glob("*.yaml")})
    if kind == "models" and ref != "none":
        raise UserError(
            f"{where}: {field}={ref!r}: no declaration {' or '.join(map(str, paths))} "
            f"(declared models: {', '.join(declared) or 'none'})"
        )
    from agentcompass_dagster.declarations import registry  # plugins import these declarations; the registry is lazy

    plugins = registry.harnesses if kind == "harnesses" else registry.environments
    if kind == "models" or ref in plugins.ids() or registry.is_class_path(ref):
        return {"id": ref}, None
    hint = did_you_mean(ref, sorted({*declared, *plugins.ids()}))
    raise UserError(
        f"{where}: {field}={ref!r}: no declaration {' or '.join(map(str, paths))} and no "
        f"{plugins.kind} plugin of that id{hint}"
    )


def check_plugin_ids(sweep: SweepConfig, where: str) -> None:
    """Every plugin the sweep names is registered: an unknown id is refused here, naming the file that
    declares it (the sweep, or the declaration a name resolved to), before any registered plugin is imported
    or loaded. A plugin named by its class path is imported here, so that a module that is not there, a
    missing class or one of the wrong kind names the file too."""
    from agentcompass_dagster.declarations import registry  # plugins import these declarations; the registry is lazy

    for index, benchmark in enumerate(sweep.benchmarks):
        registry.benchmarks.check(benchmark.id, f"benchmarks[{index}].id", where)
    for field, harness in sweep.harness_fields.items():
        registry.harnesses.check(
            harness.provider_id, f"{field}.{'provider' if harness.provider else 'id'}", harness.file or where
        )
    environment = sweep.environment
    registry.environments.check(
        environment.provider_id,
        f"environment.{'provider' if environment.provider else 'id'}",
        environment.file or where,
    )
    for index, model in enumerate(sweep.models):
        if model.provider != "none":
            registry.models.check(model.provider, f"models[{index}].provider", model.file or where)
    for index, name in enumerate(sweep.execution.analyzers or []):
        if registry.is_class_path(name):  # ids and families are checked against the analyzers at preflight
            registry.analyzers.check(name, f"execution.analyzers[{index}]", where)
