"""What a plugin is built from: the declarations (resources/<kind>/NAME.yaml, or inline in a sweep) of a
benchmark, a model, a harness and an environment, as a plugin's constructor receives them. Every
declaration forbids unknown fields: a typo is an error, not an ignored setting."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from agentcompass_dagster.contracts.errors import UserError


class Declaration(BaseModel):
    """The base of every declaration read from YAML (these, the sweep's and its parts')."""

    # A typo is an error, not an ignored setting.
    model_config = ConfigDict(extra="forbid")


class PluginDeclaration(Declaration):
    """What a plugin is built from. The plugin validates its params only once built, far from the YAML, so
    the declaration keeps the file it was read from for the plugin's errors to name."""

    id: str = Field(min_length=1)
    # resources/<kind>/NAME.yaml, or the sweep that declares it inline; set by load_sweep. Not part of what
    # was declared, so never persisted.
    _file: str | None = PrivateAttr(default=None)

    @property
    def file(self) -> str | None:
        return self._file

    def read_from(self, file: str) -> None:
        self._file = file

    def resolve_path(self, path: str | Path) -> Path:
        """A path one of its params names. A relative one is beside the file that declares it (the sweep, or
        resources/<kind>/NAME.yaml), as docker-compose resolves its paths, so a declaration names the same
        files from any working directory; an absolute one, or one read from no file (the launchpad's, a
        plugin's built in code: relative to the working directory), stays as it is."""
        path = Path(path)
        if path.is_absolute() or self._file is None:
            return path
        return (Path(self._file).parent / path).resolve()

    def __eq__(self, other: object) -> bool:
        # Where a declaration was read from is not part of what it declares: a request read back from
        # run_info.json declares what the sweep's does (a fork compares the two).
        if not isinstance(other, PluginDeclaration):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__


class BenchmarkConfig(PluginDeclaration):
    params: dict[str, Any] = Field(default_factory=dict)
    tasks: list[str] | None = None
    limit: int | None = Field(default=None, ge=1)


class ModelConfig(PluginDeclaration):
    provider: str = "none"
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)


class ProvidedDeclaration(PluginDeclaration):
    """A declaration whose plugin is its ``provider`` (each agent CLI a ``cli_agent``), else its id."""

    provider: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)

    @property
    def provider_id(self) -> str:
        return self.provider or self.id


class HarnessConfig(ProvidedDeclaration):
    """An agent program's declaration (resources/harnesses)."""


class EnvironmentConfig(ProvidedDeclaration):
    env: dict[str, str] = Field(default_factory=dict)
    capacity: int = Field(default=0, ge=0)
    open_qps: float = Field(default=0.0, ge=0)


# Where a declaration the framework writes out (a request in run_info.json) keeps the file
# each of its plugin declarations was read from, by field: their relative paths are resolved beside those
# files, not beside the copy.
DECLARATION_FILES = "declaration_files"


def declaration_files(declarations: dict[str, PluginDeclaration]) -> dict[str, str]:
    """The file of each declaration read from one, by field, absolute: the copy may be read from elsewhere."""
    return {
        field: str(Path(declaration.file).absolute())
        for field, declaration in declarations.items()
        if declaration.file is not None
    }


def split_declaration_files(data: dict[str, Any], where: str) -> tuple[dict[str, Any], dict[str, str]]:
    """A declaration without its DECLARATION_FILES, and those files (none when it names none)."""
    files = data.get(DECLARATION_FILES, {})
    if not isinstance(files, dict) or not all(isinstance(file, str) for file in files.values()):
        raise UserError(f"{where}: {DECLARATION_FILES}={files!r}: must map fields to the files that declare them")
    return {key: value for key, value in data.items() if key != DECLARATION_FILES}, files


def read_declaration_files(data: Any, validate: Callable[[Any], Any], where: str) -> Any:
    """``data`` validated (a written-out declaration whose ``declarations()`` are plugin declarations),
    each of its plugin declarations noting again the file DECLARATION_FILES says it was read from."""
    if not isinstance(data, dict):
        return validate(data)
    data, files = split_declaration_files(data, where)
    declared = validate(data)
    for field, declaration in declared.declarations().items():
        if field in files:
            declaration.read_from(files[field])
    return declared
