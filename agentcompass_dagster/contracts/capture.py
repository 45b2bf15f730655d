"""What the host keeps of a command's output: its first and its last bytes, and how many there were.

A command can write gigabytes (``head -c 2G /dev/zero``, a sparse file made by ``truncate -s``): the
host never holds more than ``OUTPUT_LIMIT`` bytes of one stream, however much passes through it, and
says in the text it keeps how many bytes it left out.
"""

from __future__ import annotations

import os

# The most the host keeps of one stream (stdout, stderr, a command's output file): half from its start,
# half from its end.
OUTPUT_LIMIT = 1_000_000
# Bytes asked for by each read of a stream.
READ_CHUNK = 1 << 16


class Capture:
    """The head and tail of one stream, fed chunk by chunk, and the count of every byte it carried."""

    def __init__(self, limit: int = OUTPUT_LIMIT) -> None:
        self.half = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            # Trimmed only once it holds twice what it keeps: each byte is copied a bounded number of
            # times, so a stream of any size costs time linear in its size.
            if len(self.tail) > 2 * self.half:
                del self.tail[: -self.half]

    def skip(self, count: int) -> None:
        """``count`` bytes passed unread (a file's middle): what the tail held is no longer the end."""
        self.tail.clear()
        self.total += count

    @property
    def left_out(self) -> int:
        return self.total - len(self.head) - min(len(self.tail), self.half)

    def data(self) -> bytes:
        """What is kept, as one file: the head, a note of how many bytes were left out, the tail."""
        tail = bytes(self.tail[-self.half :])
        if not self.left_out:
            return bytes(self.head) + tail
        return bytes(self.head) + f"\n[... {self.left_out} bytes of output left out ...]\n".encode() + tail

    def text(self) -> str:
        return self.data().decode(errors="replace")


def capture_file(fd: int, limit: int = OUTPUT_LIMIT) -> Capture:
    """The head and tail of the regular file open at ``fd``, read by offset: a sparse file of gigabytes
    costs two reads, not a pass over all of it."""
    capture = Capture(limit)
    size = os.fstat(fd).st_size
    if size <= limit:
        capture.add(os.pread(fd, size, 0))
        return capture
    capture.add(os.pread(fd, capture.half, 0))
    capture.skip(size - 2 * capture.half)
    capture.add(os.pread(fd, capture.half, size - capture.half))
    return capture
