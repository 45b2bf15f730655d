"""The types of the plain data the framework's judge (judge.py) and the tested code's child pass each
other: what a call's arguments and value may be (``Plain``), and its JSON form on the pipe (``Encoded``).
For the type checker only: the judge is copied alone into a task's environment and imports nothing of the
package when it runs."""

from __future__ import annotations

Plain = (
    None
    | bool
    | int
    | float
    | complex
    | str
    | bytes
    | list["Plain"]
    | tuple["Plain", ...]
    | dict["Plain", "Plain"]
    | set["Plain"]
    | frozenset["Plain"]
)
Encoded = None | bool | int | float | str | list["Encoded"] | dict[str, "Encoded"]
