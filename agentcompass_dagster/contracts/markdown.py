"""The one builder of the Markdown tables the package writes (summary.md, analysis_summary.md, the Dagster
assets' metadata, `agentcompass show`), so that every table escapes what its cells hold the same way.
Imports nothing of the package: the plugin contracts use it too."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A table of ``headers`` and one line per row, without a trailing newline. A cell is ``str`` of its
    value on one line: line breaks become spaces and ``|`` is escaped, since either would end the cell
    (ids, error texts and analyzer results are whatever a user, a task or a model wrote)."""
    lines = [_line(headers), "|" + "---|" * len(headers)]
    lines += [_line(row) for row in rows]
    return "\n".join(lines)


def _line(cells: Sequence[object]) -> str:
    return "| " + " | ".join(" ".join(str(cell).splitlines()).replace("|", "\\|") for cell in cells) + " |"
