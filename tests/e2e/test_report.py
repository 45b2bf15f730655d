"""`agentcompass report`: one self-contained HTML page of a results directory, built from a real sweep.

Two --direct runs of the demo benchmark with the scripted harness make one sweep with two models of
different accuracy (m1 solves everything; m2 only four tasks and one of its tasks ends in an error);
the Dagster metrics and comparison assets of the benchmark are then materialized over both models' runs
(or, in a version without the comparison asset, comparison.parquet is written here from runtime.stats). The
browser part opens the report from disk in headless Chromium (needs /usr/bin/chromium and the playwright
Python package; skipped with the reason otherwise).
"""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import numpy as np
import pandas as pd
import pytest
import yaml

from agentcompass_dagster.reporting import plots
from agentcompass_dagster.reporting.results import load_metrics, load_task_results
from agentcompass_dagster.runtime.results.stats import paired_comparison

from conftest import offline_page, run_cli

SOLVED_BY_M2 = ["create-hello", "fix-calc", "csv-to-json", "count-errors"]
FAILING = "sort-unique"
ERROR_TEXT = "boom <b>&amp; friends</b>"
K2_SWEEP, K2_MODEL = "k2 <&>", "m3"
DATA_URI = re.compile(r'src="data:image/png;base64,([A-Za-z0-9+/=\s]+)"')
PLOT_IMG = re.compile(
    r'<img class="plot" data-plot="\w+" width="(\d+)" height="(\d+)"[^>]*'
    r' src="data:image/png;base64,([A-Za-z0-9+/=\s]+)"'
)
HREF = re.compile(r'href="([^"#][^"]*)"')


def _sweep(
    directory: Path, models: list[str], harness_params: dict[str, Any], name: str = "cmp", **fields: Any
) -> Path:
    """A sweep (whichever models it holds, its runs land in results/<name>/demo/<model>/)."""
    path = directory / f"{'-'.join(models)}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": name,
                "benchmarks": [{"id": "demo"}],
                "models": [{"id": model, "provider": "none"} for model in models],
                "harness": {"id": "scripted", "params": harness_params},
                "environment": "local",
                "output": {"results_dir": str(directory / "results")},
                **fields,
            },
            sort_keys=False,
        )
    )
    return path


def _materialize_benchmark_assets(directory: Path) -> bool:
    """The Dagster metrics and comparison assets of the sweep over both models, on the runs made by
    --direct (they read each model's newest run); False when this version has no comparison asset."""
    import dagster as dg

    from agentcompass_dagster.declarations.sweep import load_sweep
    from agentcompass_dagster.defs import assets
    from agentcompass_dagster.defs.location import sweep_definitions
    from agentcompass_dagster.defs.sweep import sweep_benchmarks

    if not hasattr(assets, "comparison_asset"):
        return False
    sweep = load_sweep(_sweep(directory, ["m1", "m2"], {}))
    sweep_benchmark = sweep_benchmarks(sweep)[0]
    defs = sweep_definitions(sweep)
    result = dg.materialize(
        [a for a in defs.assets or [] if isinstance(a, dg.AssetsDefinition)],
        selection=[sweep_benchmark.key("metrics"), sweep_benchmark.key("comparison")],
        resources=defs.resources,
        instance=dg.DagsterInstance.ephemeral(),
    )
    assert result.success
    return True


def _write_comparison(results: Path) -> None:
    """What the comparison asset writes, computed the same way (paired bootstrap + exact McNemar)."""
    target = results / "cmp" / "demo" / "comparison.parquet"
    tasks = load_task_results(results, latest=True)
    finished = tasks[(tasks["attempt"] > 0) & tasks["error"].isna()]
    scores = {model: group.groupby("task_id")["score"].mean().to_dict() for model, group in finished.groupby("model")}
    c = paired_comparison(scores["m1"], scores["m2"])
    assert c is not None
    frame = pd.DataFrame(
        [
            {
                "sweep": "cmp",
                "benchmark": "demo",
                "model_a": "m1",
                "model_b": "m2",
                "n": c.n,
                "accuracy_a": c.mean_a,
                "accuracy_b": c.mean_b,
                "diff": c.diff,
                "ci_low": c.ci_low,
                "ci_high": c.ci_high,
                "only_a": c.only_a,
                "only_b": c.only_b,
                "p_value": c.p_value,
                "test": c.test,
                "verdict": c.verdict("m1", "m2"),
            }
        ]
    ).astype({"n": "int64", "only_a": "int64", "only_b": "int64"})
    target.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(target, index=False)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("report")
    m1 = _sweep(
        directory,
        ["m1"],
        {"default": {"oracle": True, "usage": {"input_tokens": 1000, "output_tokens": 200, "cost_usd": 0.01}}},
    )
    tasks: dict[str, Any] = {task: {"oracle": True} for task in SOLVED_BY_M2}
    tasks[FAILING] = {"error": ERROR_TEXT}
    m2 = _sweep(
        directory,
        ["m2"],
        {
            "default": {"answer": "x", "usage": {"input_tokens": 300, "output_tokens": 50, "cost_usd": 0.002}},
            "tasks": tasks,
        },
    )
    # a second sweep (a name to escape) with one model, k=2 attempts: fix-calc succeeds on the 2nd
    k2 = _sweep(
        directory,
        [K2_MODEL],
        {
            "default": {"oracle": True},
            "tasks": {"fix-calc": [{"answer": "x"}, {"oracle": True}], FAILING: {"error": "nope"}},
        },
        name=K2_SWEEP,
        benchmarks=[{"id": "demo", "tasks": ["create-hello", "fix-calc", FAILING]}],
        execution={"attempts": {"k": 2, "strategy": "avg"}},
    )
    # m2 and k2 have a task ending in error: completed, exit 3.
    for sweep, code in ((m1, 0), (m2, 3), (k2, 3)):
        assert run_cli("run", sweep, "--direct") == code
    if not _materialize_benchmark_assets(directory):
        _write_comparison(directory / "results")
    assert (directory / "results" / "cmp" / "demo" / "comparison.parquet").is_file()
    return directory / "results"


def _plots(document: str) -> list[plots.Plot]:
    """Each plot image of the page with the size its tag declares."""
    return [
        plots.Plot(base64.b64decode(re.sub(r"\s", "", data)), int(width), int(height))
        for width, height, data in PLOT_IMG.findall(document)
    ]


def _assert_plot(plot: plots.Plot) -> None:
    import matplotlib.image

    assert plot.png[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = matplotlib.image.imread(io.BytesIO(plot.png), format="png")
    assert pixels.shape[:2] == (plot.height, plot.width)
    assert plots.MIN_WIDTH <= plot.width <= plots.MAX_WIDTH
    colours = np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)
    assert len(colours) > 10, f"a blank plot: {len(colours)} colour(s)"


def _cell(document: str, text: str) -> bool:
    return re.search(r"<td[^>]*>\s*" + re.escape(text) + r"\s*</td>", document) is not None


def _between(text: str, start: str, end: str) -> str:
    """From the first ``start`` up to the next ``end``."""
    text = text[text.index(start) :]
    return text[: text.index(end)]


def test_report_shows_models_metrics_comparisons_plots_and_tasks(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli("report", results) == 0
    out = results / "report.html"
    assert capsys.readouterr().out.strip() == f"written: {out}"
    document = out.read_text()
    assert document.startswith("<!DOCTYPE html>")
    assert re.findall(r"<h2>(.*?)</h2>", document) == ["cmp · demo", "k2 &lt;&amp;&gt; · demo"]

    # self-contained: no script, no external reference, a CSP that forbids any request
    assert "<script" not in document.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:|//)""", document, re.IGNORECASE)
    assert "default-src &#39;none&#39;" in document

    cmp = _between(document, '<section class="benchmark" id="b0">', "</section>")
    # metrics with their intervals, as recorded in metrics.parquet
    metrics = load_metrics(results, latest=True)
    for model in ("m1", "m2"):
        row = metrics[(metrics["model"] == model) & (metrics["metric"] == "accuracy")].iloc[0]
        assert _cell(cmp, f"{row['value']:.3f}")
        if "ci_low" in metrics.columns and pd.notna(row["ci_low"]):
            assert f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}]" in cmp
    for category in ("files", "fix", "qa", "transform"):
        assert _cell(cmp, f"accuracy/{category}")

    # the comparison with its verdict: over the 17 tasks both finished, m1 solved 13 that m2 did not
    comparisons = _between(cmp, '<table class="comparisons">', "</table>")
    for cell in ("m1", "m2", "17", "1.000", "0.235", "0.765", "13", "0", "m1 better", "&lt; 0.001 (mcnemar)"):
        assert _cell(comparisons, cell), cell

    # three plots per section, each PNG of the size its tag declares, none blank; a one-model chart
    # (the second sweep's) is narrower than the two-model one
    assert len(_plots(cmp)) == 3 and len(DATA_URI.findall(document)) == 6
    found = _plots(document)
    assert len(found) == 6
    for plot in found:
        _assert_plot(plot)
    assert found[3].width < found[0].width

    # one row per task, each model's outcome linked to its trajectory page, relative to the report
    table = _between(cmp, '<table class="tasks">', "</table>")
    assert table.count("<tr") == 18 + 1
    assert table.count("✓ correct") == 18 + len(SOLVED_BY_M2)
    assert table.count("✗ wrong") == 18 - len(SOLVED_BY_M2) - 1
    assert table.count("✗ error</a>") == 1
    assert table.count('class="disagree"') == 18 - len(SOLVED_BY_M2)
    assert "boom &lt;b&gt;&amp;amp; friends&lt;/b&gt;" in table  # the error text, escaped, as a tooltip
    links = HREF.findall(table)
    assert len(links) == 2 * 18
    assert all(not link.startswith("/") for link in links)
    for link in links:
        assert (results / unquote(link)).is_file(), link
    # every outcome links to its attempt's trajectory page, written beside the report (#29)
    assert all(link.startswith("trajectories/") and link.endswith(".html") for link in links)
    assert any(f"/{FAILING}__a1.html" in link for link in links)
    # and each page links back to the report (#40)
    page = results / unquote(links[0])
    back = re.search(r'<a id="back" href="([^"]+)">', page.read_text())
    assert back is not None and (page.parent / back.group(1)).resolve() == (results / "report.html").resolve()

    # the one-model sweep with k=2: pass@k, nothing to compare, attempts counted per task
    k2 = _between(document, '<section class="benchmark" id="b1">', "</section>")
    assert _cell(k2, "pass@2") and "One model: nothing to compare." in k2
    tasks = _between(k2, '<table class="tasks">', "</table>")
    # an outcome over k attempts links to the page of its last attempt
    assert re.search(r'<td class="ok"><a href="[^"]+/create-hello__a2.html">2/2 correct</a>', tasks)
    assert re.search(r'<td class="part"><a href="[^"]+/fix-calc__a2.html">1/2 correct</a>', tasks)
    assert re.search(rf'<td class="err" title="nope"><a href="[^"]+/{FAILING}__a2.html">✗ error</a>', tasks)

    # written elsewhere, the links follow the report
    elsewhere = tmp_path / "out" / "r.html"
    elsewhere.parent.mkdir()
    assert run_cli("report", results, "-o", elsewhere) == 0
    moved = HREF.findall(elsewhere.read_text())
    assert len(moved) == len(HREF.findall(document))
    assert all((elsewhere.parent / unquote(link)).resolve().is_file() for link in moved)


def test_report_in_headless_chromium(results: Path, tmp_path: Path) -> None:
    """Opened from disk, the page makes no request beyond its own file, logs no error, and its plots
    decode at the size their tags declare with more than one colour; at 1400 px a benchmark's three plots
    share one row, none drawn larger than its own size."""
    out = tmp_path / "report.html"
    assert run_cli("report", results, "-o", out) == 0
    url = out.resolve().as_uri()
    with offline_page(1400, 1000) as (page, seen):
        from playwright.sync_api import expect  # offline_page skipped the test if it is missing

        page.goto(url, wait_until="load")
        expect(page.locator("h2")).to_have_text(["cmp · demo", f"{K2_SWEEP} · demo"])
        expect(page.locator("table.comparisons")).to_contain_text("m1 better")
        expect(page.locator("#b0 table.tasks tbody tr")).to_have_count(18)
        expect(page.locator("#b1 table.tasks tbody tr")).to_have_count(3)
        images = page.evaluate("""() => Array.from(document.querySelectorAll('img.plot')).map(img => {
            const canvas = document.createElement('canvas');
            canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
            const ctx = canvas.getContext('2d');
            ctx.drawImage(img, 0, 0);
            const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
            const colours = new Set();
            for (let i = 0; i < data.length && colours.size < 50; i += 4 * 97)
                colours.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
            const box = img.getBoundingClientRect(), grid = img.closest('.plots').getBoundingClientRect();
            return {plot: img.dataset.plot, complete: img.complete, width: img.naturalWidth,
                    height: img.naturalHeight, declared: [img.width, img.height].map(Number),
                    tag: [Number(img.getAttribute('width')), Number(img.getAttribute('height'))],
                    top: box.top, left: box.left - grid.left, shown: box.width, grid: grid.width,
                    colours: colours.size};
        })""")
        links = page.eval_on_selector_all("table.tasks a", "links => links.map(a => a.href)")
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)

    assert [i["plot"] for i in images] == ["accuracy", "categories", "cost"] * 2
    for image in images:
        assert image["complete"] and [image["width"], image["height"]] == image["tag"], image
        assert image["colours"] > 1, f"blank plot: {image}"
        assert image["shown"] <= image["width"] + 2, f"a plot stretched beyond its own size (and border): {image}"
    # At 1400 px the three plots of a benchmark share one row across the page, not one plot per row.
    for section in (images[:3], images[3:]):
        assert len({round(i["top"]) for i in section}) == 1, section
        assert section[-1]["left"] > section[-1]["grid"] / 2, section
    assert len(links) == 2 * 18 + 3
    for link in links:
        parts = urlsplit(link)
        assert parts.scheme == "file" and Path(unquote(parts.path)).is_file(), link
    assert not seen, f"the report reached beyond the file or logged an error: {seen}"
    shot = (tmp_path / "report.png").read_bytes()
    assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 50_000
    print(f"screenshot: {tmp_path / 'report.png'}")


def test_report_of_a_missing_or_empty_directory_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for directory in (tmp_path / "missing", tmp_path):
        assert run_cli("report", directory) == 2
        err = capsys.readouterr().err
        assert err.startswith("agentcompass: error: ") and err.count("\n") == 1, err
        assert str(directory) in err
    assert not (tmp_path / "report.html").exists()


def test_plots_are_sized_for_one_model_and_drawn_without_intervals(results: Path) -> None:
    """One model's chart comes at the smallest size, not stretched to a page; with nothing to draw there
    is no figure, only why."""
    metrics = load_metrics(results, latest=True)
    tasks = load_task_results(results, latest=True)
    one = metrics[metrics["model"] == "m2"].drop(columns=["stderr", "ci_low", "ci_high"], errors="ignore")
    no_usage = tasks.assign(cost_usd=float("nan"), input_tokens=0, output_tokens=0)
    for png in (plots.accuracy_with_ci(one), plots.category_heatmap(one), plots.cost_vs_accuracy(one, no_usage)):
        assert isinstance(png, plots.Plot)
        _assert_plot(png)
    one_model = plots.accuracy_with_ci(one)
    assert isinstance(one_model, plots.Plot) and one_model.width == plots.MIN_WIDTH
    assert plots.accuracy_with_ci(metrics.iloc[0:0]) == plots.NoPlot(
        "No accuracy recorded: the benchmark's metrics have none."
    )
    assert plots.cost_vs_accuracy(metrics, tasks.iloc[0:0]) == plots.NoPlot(
        "No usage recorded: no model with an accuracy recorded cost, tokens or task time."
    )
    no_categories = metrics[~metrics["metric"].str.startswith("accuracy/")]
    assert plots.category_heatmap(no_categories) == plots.NoPlot(
        "No accuracy per category: the tasks have no categories."
    )
