"""The sandbox's seccomp filter: a classic-BPF program that bubblewrap installs (``--seccomp FD``) on every
command it runs, denying the system calls an agent has no use for and that reach state outside its
attempt or attack the kernel:

- the kernel keyrings (``keyctl``, ``add_key``, ``request_key``): a key an attempt adds to its user's
  keyring outlives the attempt, so attempt 1 left the solution it saw while the verifier ran for
  attempt 2 to read back, across runs and models (pass@k independence broken);
- new user namespaces (``unshare`` and ``clone`` with CLONE_NEWUSER; ``clone3``, whose flags sit behind
  a pointer the filter cannot read, answers ENOSYS so that the C library falls back to ``clone``, as
  Docker's default profile does): they hand back every capability inside;
- io_uring, ptrace, perf_event_open, bpf, userfaultfd, kexec and module loading: kernel attack surface.

Denied calls fail with EPERM; a call of another architecture (x32 on x86_64) is refused the same way and
a program of another architecture is killed. The program is assembled here, without libseccomp."""

from __future__ import annotations

import functools
import os
import platform
import struct
from dataclasses import dataclass

# struct seccomp_data: nr (u32), arch (u32), instruction_pointer (u64), args[6] (u64, low word first).
NR, ARCH, ARG0_LOW = 0, 4, 16
LD_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
ALLOW, KILL_PROCESS, ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
EPERM, ENOSYS = 1, 38
CLONE_NEWUSER = 0x10000000
X32_BIT = 0x40000000


@dataclass(frozen=True)
class Table:
    audit_arch: int
    denied: tuple[int, ...]
    clone: int
    clone3: int
    unshare: int
    x32: bool


# keyctl, add_key, request_key, io_uring_setup/enter/register, ptrace, perf_event_open, bpf,
# userfaultfd, kexec_load, kexec_file_load, init_module, finit_module, delete_module.
TABLES = {
    "x86_64": Table(
        0xC000003E,
        (250, 248, 249, 425, 426, 427, 101, 298, 321, 323, 246, 320, 175, 313, 176),
        clone=56,
        clone3=435,
        unshare=272,
        x32=True,
    ),
    "aarch64": Table(
        0xC00000B7,
        (219, 217, 218, 425, 426, 427, 117, 241, 280, 282, 104, 294, 105, 273, 106),
        clone=220,
        clone3=435,
        unshare=97,
        x32=False,
    ),
}


def supported() -> bool:
    return platform.machine() in TABLES


def _instruction(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


Step = tuple[str | None, int, int, str | None, str | None]  # label, code, k, jump-if-true, jump-if-false


@functools.cache
def program() -> bytes:
    """The filter for this machine's architecture, as bwrap reads it (an array of sock_filter)."""
    table = TABLES[platform.machine()]
    steps: list[Step] = [
        (None, LD_ABS, ARCH, None, None),
        (None, JEQ, table.audit_arch, "nr", "kill"),
        ("nr", LD_ABS, NR, None, None),
        *([(None, JGE, X32_BIT, "deny", None)] if table.x32 else []),
        *((None, JEQ, nr, "deny", None) for nr in table.denied),
        (None, JEQ, table.clone3, "enosys", None),
        (None, JEQ, table.clone, "flags", None),
        (None, JEQ, table.unshare, "flags", None),
        (None, RET, ALLOW, None, None),
        ("flags", LD_ABS, ARG0_LOW, None, None),
        (None, JSET, CLONE_NEWUSER, "deny", None),
        (None, RET, ALLOW, None, None),
        ("kill", RET, KILL_PROCESS, None, None),
        ("enosys", RET, ERRNO | ENOSYS, None, None),
        ("deny", RET, ERRNO | EPERM, None, None),
    ]
    # Jumps are relative: how many instructions to skip.
    where = {label: index for index, (label, *_) in enumerate(steps) if label is not None}
    return b"".join(
        _instruction(code, k, where[true] - index - 1 if true else 0, where[false] - index - 1 if false else 0)
        for index, (_, code, k, true, false) in enumerate(steps)
    )


def filter_fd() -> int:
    """A fresh descriptor holding the program from its start, for one bwrap (which reads it to its end):
    the caller passes it to the child and closes it after the spawn."""
    fd = os.memfd_create("agentcompass-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program())
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
