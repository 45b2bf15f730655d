"""The contestants of a sweep: each harness x model it evaluates. A sweep of one harness names them by
the model's id, as it did before a sweep could declare several; a sweep of several by
``<harness>.<model>``, in its Dagster partitions, run directories, summary, comparisons and report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentcompass_dagster.contracts.request import contestant_id

if TYPE_CHECKING:
    import pandas as pd

    from agentcompass_dagster.contracts.declarations import HarnessConfig, ModelConfig


@dataclass(frozen=True)
class Contestant:
    id: str
    harness: HarnessConfig
    model: ModelConfig


def by_contestant(frame: pd.DataFrame, several_harnesses: bool) -> pd.DataFrame:
    """Rows of results (a model and a harness column) whose ``model`` names the row's contestant: what the
    summary's plots, the comparisons and the report show a row as. The files keep the model's id."""
    if not several_harnesses or frame.empty:
        return frame
    return frame.assign(
        model=[
            contestant_id(str(harness), str(model), True) for harness, model in zip(frame["harness"], frame["model"])
        ]
    )
