"""The one Markdown table builder (issue #30): what every table of summaries, analysis and metadata is."""

from __future__ import annotations

from agentcompass_dagster.contracts.markdown import markdown_table


def test_a_table_is_its_header_separator_and_rows_each_cell_on_one_line_with_pipes_escaped() -> None:
    table = markdown_table(["task", "error"], [("a|b", "Traceback\n  boom | bang\n"), ("c", 0.5), ("", None)])
    assert table == ("| task | error |\n|---|---|\n| a\\|b | Traceback   boom \\| bang |\n| c | 0.5 |\n|  | None |")
    assert markdown_table(["metric", "value"], []) == "| metric | value |\n|---|---|"
