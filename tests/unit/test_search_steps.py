"""The request path's statements, driven without a database (the rows are the factories')."""

from __future__ import annotations

from typing import Any

from ranking_factories import (
    DECISION_ID,
    PROJECT,
    WORKSPACE,
    decision_row,
    lexical_row,
    record_row,
    vector_row,
)

from pyretrieve.db.steps import Batch, Call, Steps
from pyretrieve.request import build_request, query_embedding, search_steps
from pyretrieve.types import Scope, SearchResult


def _drive(
    steps: Steps[SearchResult], replies: dict[str, list[dict[str, Any]]]
) -> tuple[SearchResult, list[Call]]:
    """Run the steps, answering each call with its step's rows; the result and the calls."""
    calls: list[Call] = []
    item = next(steps)
    try:
        while True:
            batch = item.calls if isinstance(item, Batch) else (item,)
            calls.extend(batch)
            answers = tuple(replies[call.step] for call in batch)
            item = steps.send(answers if isinstance(item, Batch) else answers[0])
    except StopIteration as stop:
        result: SearchResult = stop.value
        return result, calls


def test_the_records_asked_for_are_the_ids_of_both_legs_once_in_text_order() -> None:
    records = {n: record_row(n) for n in (1, 2, 3, 5, 6, 300)}
    lexical = [lexical_row(records[n], rank) for rank, n in enumerate((5, 300, 1, 3), start=1)]
    vector = [vector_row(records[n], rank) for rank, n in enumerate((3, 6, 2, 300), start=1)]
    request = build_request(
        "fox",
        scope=Scope(workspace=WORKSPACE, project=PROJECT, purpose="answering"),
        embedding=[0.1, 0.2, 0.3],
        model="m",
    )
    result, calls = _drive(
        search_steps(request, query_embedding(request, {})),
        {
            "authorize": [decision_row()],
            "model_defaults": [],
            "lexical": lexical,
            "vector": vector,
            "fragments": list(records.values()),
        },
    )
    (fragments,) = [call for call in calls if call.step == "fragments"]
    ids = [records[n]["fragment_id"] for n in (1, 2, 3, 5, 6, 300)]
    assert fragments.params == (DECISION_ID, sorted(ids, key=str))
    assert len(result.results) + len(result.omissions) == len(records)
