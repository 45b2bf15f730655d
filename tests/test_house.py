"""The checks anyone can run on the layout of the package: the runtime imports no Dagster and lives in
rooms, the contracts stand alone and are ABCs or Protocols, each public name has one meaning, no module
imports another that imports it back, no module over 450 lines, no function over 60, every requirement
id cited is defined in docs/requirements.md, the read views of runtime/results/scores.py name and type
their fields as the models they read do, and the results directory's file names are spelled in
runtime/store/layout.py only."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel, TypeAdapter

from agentcompass_dagster.runtime.store import layout
from agentcompass_dagster.runtime.results.scores import AttemptMetaView, AttemptView, DetailView, UsageView
from agentcompass_dagster.contracts.records import EvaluatedAttempt, LimitHit, Usage
from agentcompass_dagster.runtime.store.outcomes import TaskDetail

from conftest import REPO

PACKAGE = REPO / "agentcompass_dagster"
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60
REQUIREMENTS = REPO / "docs" / "requirements.md"
REQUIREMENT_ID = re.compile(r"R-[A-Z]+-[0-9]+")
DEFINITION = re.compile(r"- \*\*(R-[A-Z]+-[0-9]+)\*\* \S.*")


def sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "demo_tasks" not in p.parts and "resources" not in p.parts)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_at_load(path: Path, name: str, modules: set[str]) -> set[str]:
    """The package's modules that importing ``name`` imports: top-level imports, those under if/try at
    module level, not those under ``if TYPE_CHECKING`` or inside functions."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def named(module: str) -> str | None:
        while module and module not in modules:
            module = module.rpartition(".")[0]
        return module or None

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.Import):
                found.update(m for a in node.names if (m := named(a.name)))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                found.update(m for a in node.names if (m := named(f"{base}.{a.name}")))
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(node.orelse)
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
                visit(getattr(node, "finalbody", []))

    visit(ast.parse(path.read_text()).body)
    found.discard(name)
    return found


def imports_anywhere(path: Path, prefixes: tuple[str, ...]) -> list[str]:
    """``path``'s imports of a module named by one of ``prefixes``, wherever they are (under TYPE_CHECKING
    and inside functions too), each as "file:line imports module"."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
        found += [f"{path.relative_to(PACKAGE)}:{node.lineno} imports {n}" for n in names if n.startswith(prefixes)]
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_the_runtime_and_durable_layers_import_no_dagster() -> None:
    """`import agentcompass_dagster.runtime` (and every module below it and below durable/) loads no
    dagster module: the runtime runs without the Dagster layer."""
    names = [
        module_name(p)
        for p in sources()
        if module_name(p).startswith(
            ("agentcompass_dagster.runtime", "agentcompass_dagster.durable", "agentcompass_dagster.reruns")
        )
    ]
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m == 'dagster' or m.startswith('dagster.')))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]", proc.stdout[:500]


RUNTIME_ROOMS = {"store", "execution", "results"}


def test_the_runtime_is_in_rooms() -> None:
    """Issue #30: no module sits directly under runtime/ (only its package docstring); each is in one of
    the rooms that show the architecture: store/ (the run directory and its records), execution/
    (running requests), results/ (what the tasks come to)."""
    runtime = PACKAGE / "runtime"
    loose = sorted(p.name for p in runtime.glob("*.py") if p.name != "__init__.py")
    rooms = {p.name for p in runtime.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert loose == [], f"modules directly under runtime/: {loose}"
    assert rooms == RUNTIME_ROOMS, f"runtime/ rooms: {sorted(rooms)}"
    assert all(any(room.glob("*.py")) for room in (runtime / name for name in rooms))


# Issue 40: the package's top holds rooms, each a package whose docstring says what lives there and what
# it may import; only the code location Dagster loads (definitions.py) sits beside them.
ROOMS = {
    "cli",
    "contracts",
    "declarations",
    "defs",
    "dispatch",
    "durable",
    "gateway",
    "launcher",
    "plugins",
    "reporting",
    "reruns",
    "runtime",
    "templates",
}
PLUGIN_FAMILIES = {"benchmarks", "harnesses", "environments", "models", "analyzers"}
# The rooms from the bottom up: a module imports modules of its own room, of a room on its own level, or of
# a room below, never one above (wherever the import is: under TYPE_CHECKING, inside a function). The
# run directory's store and the scores it is read into are one level: the run directory computes its
# tasks' scores on read, and the scores read its records.
LEVELS = [
    ("contracts",),
    ("declarations",),
    ("runtime.store", "runtime.results"),
    ("plugins.models", "plugins.analyzers", "plugins.environments"),
    ("durable",),
    ("gateway",),
    ("plugins.harnesses", "plugins.benchmarks"),
    ("runtime.execution",),
    ("reruns", "dispatch"),
    ("reporting",),
    ("defs",),
    ("launcher",),
    ("cli",),
    ("definitions",),
]
# The reporting modules (before issue 40 they sat loose at the package's top beside runtime/results/).
REPORTING = {
    "results",
    "report",
    "report_data",
    "diagnosis",
    "plots",
    "trajectory",
    "trajectory_data",
    "history",
    "show",
}


def room_of(module: str) -> str:
    """The room of a module of the package: its first package below the top, or the second for the
    runtime's and the plugins' rooms."""
    parts = module.split(".")[1:]
    return ".".join(parts[:2] if parts[0] in ("runtime", "plugins") and len(parts) > 1 else parts[:1])


def test_the_package_top_is_rooms_that_say_what_they_may_import() -> None:
    """Issue 40: no loose module at the package's top but definitions.py (the command, the declarations,
    the reporting and the helpers of all three sat there: 18 modules); the built-in plugins are under one
    parent; each room's __init__.py says what lives there and what it may import."""
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "definitions.py"))
    assert loose == [], f"modules at the package's top: {loose}"
    rooms = {p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.is_symlink() and p.name != "__pycache__"}
    assert rooms == ROOMS, sorted(rooms ^ ROOMS)
    families = {p.name for p in (PACKAGE / "plugins").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert families == PLUGIN_FAMILIES, sorted(families)
    assert {p.stem for p in (PACKAGE / "reporting").glob("*.py")} == REPORTING | {"__init__"}
    unsaid = [
        room
        for room in sorted((ROOMS - {"templates"}) | {f"plugins/{f}" for f in PLUGIN_FAMILIES})
        if "import" not in (ast.get_docstring(ast.parse((PACKAGE / room / "__init__.py").read_text())) or "")
    ]
    assert unsaid == [], f"rooms whose docstring does not say what they may import: {unsaid}"


def test_the_rooms_import_only_their_level_and_below() -> None:
    """Issue 40: layers point down only (the declarations imported the Dagster layer, the run directory's
    store and the execution imported each other, the execution and the durable layer too, the launcher
    the command's progress board, the contracts the request they name)."""
    level = {room: index for index, rooms in enumerate(LEVELS) for room in rooms}
    # The package's, the runtime's and the plugins' __init__.py: docstrings that import nothing.
    parents = {"agentcompass_dagster", "agentcompass_dagster.runtime", "agentcompass_dagster.plugins"}
    modules = [p for p in sources() if module_name(p) not in parents]
    known = {room_of(module_name(p)) for p in modules}
    assert known - set(level) == set(), f"rooms without a level: {sorted(known - set(level))}"
    upward = []
    for path in modules:
        room = room_of(module_name(path))
        for found in imports_anywhere(path, ("agentcompass_dagster.",)):
            target = room_of(found.rpartition(" imports ")[2])
            if level[target] > level[room]:
                upward.append(f"{found} ({room} -> {target})")
    assert room_of("agentcompass_dagster.plugins.models.none") == "plugins.models", "the check itself"
    assert upward == [], "\n".join(upward)


def test_the_contracts_import_nothing_from_the_runtime() -> None:
    """Issue #30: a plugin imports the contracts and nothing else of the framework's insides (the level
    test above), and importing the contracts loads no runtime module."""
    code = (
        "import sys, agentcompass_dagster.contracts\n"
        "print(sorted(m for m in sys.modules if m.startswith('agentcompass_dagster.runtime')))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]", proc.stdout[:500]


# Names every module may define for itself: a program's entry point, and a module's one rendering of
# what it holds (called qualified: summary.render, history.render).
OWN_IN_EVERY_MODULE = {"main", "render"}
GLOSSARY = REPO / "docs" / "glossary.md"


def glossary() -> tuple[set[str], dict[str, str]]:
    """The terms docs/glossary.md defines (bold, ``**term**``) and its retired words (``| `word` ... | use |``
    rows below "Retired words"; one qualified as a ``bool`` parameter is keyed ``word:bool``, one as a
    module ``word:module``), each with what replaces it."""
    defined, _, retired_part = GLOSSARY.read_text().partition("## Retired words")
    retired = {}
    for word, qualifier, use in re.findall(r"^\| `(\w+)`([^|]*)\| (.+) \|$", retired_part, re.M):
        retired[f"{word}:bool" if "bool" in qualifier else f"{word}:module" if "module" in qualifier else word] = use
    return set(re.findall(r"\*\*([a-z_]+)\*\*", defined)), retired


def test_the_glossary_names_every_shared_name_and_no_retired_word_is_used() -> None:
    """Issue 40: one word per idea, written down (docs/glossary.md). A module or package name that occurs
    twice in the package is a glossary term, so that the two are one meaning (records.py, errors.py and
    steps.py each meant two things); no retired word names a module, class or function, and no ``bool``
    parameter is called ``durable`` (it meant fsynced: the atomic writes' flag is ``fsync``)."""
    terms, retired = glossary()
    assert {"run_name", "reuse", "fresh", "resources", "durable"} <= terms, "the check itself"
    names: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*"):
        if "__pycache__" in path.parts or "demo_tasks" in path.parts or path.name == "__init__.py":
            continue
        if path.suffix == ".py" or path.is_dir():
            names.setdefault(path.stem, []).append(str(path.relative_to(PACKAGE)))
    shared = {
        name: where
        for name, where in names.items()
        if len(where) > 1 and name not in terms and name.removesuffix("s") not in terms
    }
    assert shared == {}, f"names used twice that docs/glossary.md does not define: {shared}"
    used = []
    for path in sources():
        used += [
            f"{path.relative_to(PACKAGE)}: module {path.stem}"
            for word in retired
            if word in (path.stem, f"{path.stem}:module")
        ]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in retired:
                used.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}: use {retired[node.name]}")
            if (
                isinstance(node, ast.arg)
                and node.annotation is not None
                and f"{node.arg}:{ast.unparse(node.annotation)}" in retired
            ):
                used.append(f"{path.relative_to(PACKAGE)}:{node.lineno} parameter {node.arg}")
    assert used == [], used


def test_each_public_name_has_one_meaning() -> None:
    """Issue #30: a public class or function at module level is defined in one module only (typing
    overloads aside), so a name means one thing wherever it is read; the retired words are gone, and
    ``run_requests`` is only the Dagster layer's (it builds dg.RunRequests), ``checkpoint`` only the
    durable layer's and the fork lineage's."""
    defined: dict[str, list[str]] = {}
    for path in sources():
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or node.name.startswith("_"):
                continue
            if any(ast.unparse(d).endswith("overload") for d in getattr(node, "decorator_list", [])):
                continue
            defined.setdefault(node.name, []).append(module_name(path))
    twice = {name: where for name, where in defined.items() if len(where) > 1 and name not in OWN_IN_EVERY_MODULE}
    assert twice == {}, twice
    assert defined["run_requests"] == ["agentcompass_dagster.defs.schedules"]
    runtime_words = {
        word
        for p in sources()
        if ".runtime." in module_name(p)
        for node in ast.walk(ast.parse(p.read_text()))
        for word in [getattr(node, "id", None) or getattr(node, "attr", None) or getattr(node, "name", None)]
        if isinstance(word, str) and "checkpoint" in word.lower()
    }
    # The fork's lineage names the durable checkpoint it was cut at; the limited environment passes the
    # durable checkpoints' roots through: both the durable meaning.
    assert runtime_words <= {"checkpoint_seq", "checkpoint_roots"}, runtime_words


def test_every_contract_is_an_abc_or_a_protocol() -> None:
    """Issue #30: every class of contracts/ is a contract a plugin subclasses or satisfies (an ABC or a
    Protocol), or a value passed across it (a pydantic record, an enum, a named tuple, an exception, the
    output Capture)."""
    import enum
    import importlib
    import inspect
    from abc import ABC

    from pydantic import BaseModel

    values = (BaseModel, enum.Enum, tuple, Exception)
    loose = []
    for path in sorted((PACKAGE / "contracts").glob("*.py")):
        module = importlib.import_module(module_name(path))
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or issubclass(cls, values) or name in ("Capture", "TaskSpec"):
                continue
            if not (ABC in cls.__mro__ or getattr(cls, "_is_protocol", False)):
                loose.append(f"{path.name}: {name}")
    assert loose == [], loose


def test_every_abstract_method_of_a_contract_says_what_it_does_with_an_example() -> None:
    """Issue 40: a plugin author reads the contracts alone: every abstract method of every contract class
    has a docstring with an ``Example::`` section (Benchmark.load_tasks and evaluate, Environment.open,
    the session's write_file and read_file, Model.complete, HarnessSession.run and Analyzer.summarize
    had none, and summarize was not abstract)."""
    import importlib
    import inspect

    bare = []
    for path in sorted((PACKAGE / "contracts").glob("*.py")):
        module = importlib.import_module(module_name(path))
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__:
                continue
            for method in sorted(getattr(cls, "__abstractmethods__", ())):
                if "Example::" not in (inspect.getdoc(getattr(cls, method)) or ""):
                    bare.append(f"{name}.{method}")
    assert bare == [], bare
    from agentcompass_dagster.contracts.analyzer import Analyzer

    assert "summarize" in Analyzer.__abstractmethods__


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["check", "format"])
def test_ruff_finds_nothing(command: list[str]) -> None:
    """Issue 40: `ruff check` (pyproject's [tool.ruff]: pyflakes, pycodestyle's statement errors, lines over
    120 characters) and `ruff format --check` are clean over the whole repository. Before: 14 findings,
    among them two unused imports in the CLI agents' session and one in the report; 51 lines over 120
    characters (up to 217), and 274 files ruff would format."""
    ruff = Path(sys.executable).with_name("ruff")
    if not ruff.is_file():
        pytest.skip(f"{ruff} is missing: pip install -e '.[test]'")
    proc = subprocess.run(
        [str(ruff), *command, "--no-cache", "."], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-1000:]


@pytest.mark.slow
def test_mypy_finds_nothing(tmp_path: Path) -> None:
    """Issue 40: `mypy` (pyproject's [tool.mypy], over the package, which ships py.typed) finds nothing.
    Before: 98 errors in 34 files, and 36 `type: ignore`s. Its cache is the test's own."""
    mypy = Path(sys.executable).with_name("mypy")
    if not mypy.is_file():
        pytest.skip(f"{mypy} is missing: pip install -e '.[test]'")
    proc = subprocess.run(
        [str(mypy), "--cache-dir", str(tmp_path / "cache")], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-1000:]


def test_no_module_imports_one_that_imports_it_back() -> None:
    """The import graph of the package (imports made when a module loads) has no cycle."""
    paths = {module_name(p): p for p in sources()}
    graph = {name: imported_at_load(path, name, set(paths)) for name, path in paths.items()}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]], "the check itself"
    assert cycles(graph) == []


def test_no_module_is_over_450_lines_and_no_function_over_60() -> None:
    long_modules, long_functions = [], []
    for path in sources():
        text = path.read_text()
        if text.count("\n") > MAX_MODULE_LINES:
            long_modules.append(f"{path.relative_to(REPO)}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {length} lines")
    assert not long_modules and not long_functions, "\n".join(long_modules + long_functions)


def cited_requirement_ids() -> dict[str, list[str]]:
    """Each requirement id cited in the package, tests/, perf/, README.md or docs/ (but docs/requirements.md,
    which defines them), with the files citing it."""
    files = [REPO / "README.md", *(p for p in (REPO / "docs").glob("*.md") if p != REQUIREMENTS)]
    files += [
        p
        for top in (PACKAGE, REPO / "tests", REPO / "perf")
        for p in top.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]
    cited: dict[str, list[str]] = {}
    for path in sorted(files):
        for found in sorted(set(REQUIREMENT_ID.findall(path.read_bytes().decode("utf-8", "replace")))):
            cited.setdefault(found, []).append(str(path.relative_to(REPO)))
    return cited


def defined_requirement_ids() -> list[str]:
    """The ids docs/requirements.md defines, one ``- **R-XXX-N** text`` line each; any other line naming
    an id at its start is malformed and fails."""
    defined, malformed = [], []
    for number, line in enumerate(REQUIREMENTS.read_text().splitlines(), 1):
        if match := DEFINITION.fullmatch(line):
            defined.append(match[1])
        elif line.startswith("-") and REQUIREMENT_ID.search(line):
            malformed.append(f"docs/requirements.md:{number}: {line[:80]}")
    assert not malformed, "not a `- **R-XXX-N** text` line:\n" + "\n".join(malformed)
    return defined


def test_every_cited_requirement_id_is_defined_and_every_defined_one_cited() -> None:
    """Issue #30: every requirement id the code, tests, perf scripts or README cite has exactly one line in
    docs/requirements.md, grouped by prefix and in number order, and that file defines no id nothing cites."""
    cited, defined = cited_requirement_ids(), defined_requirement_ids()
    assert len(cited) > 30 and len(defined) > 30, "the scan itself"
    undefined = [f"{rid} (cited in {', '.join(cited[rid][:3])})" for rid in sorted(cited) if rid not in defined]
    uncited = sorted(set(defined) - set(cited))
    duplicates = sorted({rid for rid in defined if defined.count(rid) > 1})
    assert not undefined, "cited but not defined in docs/requirements.md:\n" + "\n".join(undefined)
    assert not uncited, f"defined in docs/requirements.md but cited nowhere: {uncited}"
    assert not duplicates, f"defined more than once: {duplicates}"
    keys = [(rid.rsplit("-", 1)[0], int(rid.rsplit("-", 1)[1])) for rid in defined]
    prefixes = [prefix for i, (prefix, _) in enumerate(keys) if i == 0 or keys[i - 1][0] != prefix]
    assert len(prefixes) == len(set(prefixes)), f"a prefix's ids are split into several groups: {prefixes}"
    assert all(a < b for a, b in zip(keys, keys[1:]) if a[0] == b[0]), "ids of one prefix out of number order"


def spelled(path: Path, names: set[str]) -> list[str]:
    """Where the code of ``path`` spells one of ``names``: a file name (one with a dot) anywhere but in a
    docstring or other bare string; a directory name (``details``, ``replays``: words a table header or
    a mapping's key also uses) where it makes a path, beside a ``/``, as a call's argument or assigned."""
    tree = ast.parse(path.read_text())
    nodes = list(ast.walk(tree))
    bare = {id(node.value) for node in nodes if isinstance(node, ast.Expr)}
    in_path = {
        id(side)
        for node in nodes
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)
        for side in (node.left, node.right)
    }
    in_path |= {id(arg) for node in nodes if isinstance(node, ast.Call) for arg in node.args}
    in_path |= {id(node.value) for node in nodes if isinstance(node, (ast.Assign, ast.AnnAssign))}
    return [
        f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}"
        for node in nodes
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in names
        and id(node) not in bare
        and ("." in node.value or id(node) in in_path)
    ]


def test_the_results_directory_file_names_are_spelled_in_the_layout_only() -> None:
    """Issue #30: every name of a file or directory of the results directory is a constant of
    runtime/store/layout.py that the other modules import; none spells one again (summary.md was one constant
    of the layout and another of the Dagster assets, comparison.parquet one constant and a literal)."""
    names = {value for name, value in vars(layout).items() if name.isupper() and isinstance(value, str)}
    assert {"run_info.json", "summary.md", "comparison.parquet", "report.html", "trajectories"} <= names
    found = [line for path in sources() if path != Path(layout.__file__) for line in spelled(path, names)]
    assert not found, "spelled outside runtime/store/layout.py:\n" + "\n".join(found)


# Each read view of runtime/results/scores.py and the model it reads; AttemptMetaView reads the ``meta`` mapping
# of EvaluatedAttempt, a key of which a property of the model reads.
READ_MODELS: dict[type[BaseModel], type[BaseModel]] = {
    DetailView: TaskDetail,
    AttemptView: EvaluatedAttempt,
    UsageView: Usage,
}
READ_VIEWS: dict[type[BaseModel], Any] = {**READ_MODELS, AttemptMetaView: dict[str, Any]}


def as_read(annotation: Any) -> Any:
    """A view's annotation with each view in it replaced by what the view reads."""
    if annotation in READ_VIEWS:
        return READ_VIEWS[annotation]
    args = get_args(annotation)
    read = tuple(as_read(arg) for arg in args)
    if read == args:
        return annotation
    origin = get_origin(annotation)
    return Union[read] if origin in (Union, types.UnionType) else origin[read]


def view_mismatches(view: type[BaseModel], model: type[BaseModel]) -> list[str]:
    """Each field of ``view`` that ``model`` lacks, annotates otherwise, or defaults to a value the view
    does not read as its own default."""
    found = []
    for name, field in view.model_fields.items():
        where = f"{view.__name__}.{name}"
        if name not in model.model_fields:
            found.append(f"{where}: {model.__name__} has no field {name!r}")
            continue
        source = model.model_fields[name]
        if as_read(field.annotation) != source.annotation:
            found.append(f"{where}: {field.annotation!r}, reads {model.__name__}.{name}: {source.annotation!r}")
        elif field.is_required() != source.is_required():
            found.append(f"{where}: required is {field.is_required()}, in {model.__name__} {source.is_required()}")
        elif not field.is_required():
            default = TypeAdapter(source.annotation).dump_python(source.get_default(call_default_factory=True))
            if TypeAdapter(field.annotation).validate_python(default) != field.get_default(call_default_factory=True):
                found.append(f"{where}: defaults to something else than {model.__name__}.{name} ({default!r})")
    return found


def test_the_read_views_have_the_fields_of_the_models_they_read() -> None:
    """Issue #30: DetailView, AttemptView and UsageView (runtime/results/scores.py) are slim copies of TaskDetail,
    EvaluatedAttempt and Usage (runtime/store/outcomes.py), written by hand: each field of a view is a field of
    its model with the same annotation (a view where the model has the model the view reads) and reads
    the model's default as its own default. A field renamed or retyped in the model alone fails here;
    so does a view property (``error``, ``is_error``, ``analysis_errors``, which reads a key of
    ``meta``) that no longer gives what the model's property of that name gives."""
    found = [m for view, model in READ_MODELS.items() for m in view_mismatches(view, model)]
    assert not found, "\n".join(found)
    failed = EvaluatedAttempt(
        attempt=2,
        correct=True,
        score=0.5,
        eval_error="judge down",
        failure="no verdict",
        limit=LimitHit(limit="max_turns", allowance=3, used=3),
        analysis_result={"loops": 1},
        usage=Usage(input_tokens=7, output_tokens=5, cost_usd=None),
        duration_s=1.5,
        meta={"analysis_errors": {"loops": "boom"}},
    )
    detail = TaskDetail(
        task_id="t",
        category="c",
        k=2,
        strategy="pass",
        attempts={"2": failed},
        attempts_tried=2,
        correct=True,
        score=0.5,
        error="endpoint down",
        failure="no verdict",
    )
    read = DetailView.model_validate_json(detail.model_dump_json())
    pairs = [(read, detail), (read.attempts["2"], failed), (read.attempts["2"].usage, failed.usage)]
    for view, model in pairs:
        for name in (n for n, value in vars(type(view)).items() if isinstance(value, property)):
            assert getattr(view, name) == getattr(model, name), f"{type(view).__name__}.{name}"
        values = view.model_dump(exclude={"attempts", "usage", "meta"})
        assert values == model.model_dump(include=set(values)), type(view).__name__
