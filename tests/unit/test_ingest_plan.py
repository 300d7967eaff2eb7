"""The batch planner decides insert / supersede / unchanged / retract without a server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from uuid import UUID

import pytest

from pyretrieve.ingest import plan as plan_module
from pyretrieve.ingest.plan import (
    Existing,
    Outcome,
    document_of,
    documents_removed,
    legacy_firsts,
    like_prefix,
    lookup_uris,
    plan_batch,
    probes_of,
    select_gone,
    select_legacy,
    select_surplus,
    tally,
)
from pyretrieve.ingest.records import Record, body_digest
from pyretrieve.ingest.reports import IngestIssue


def rec(uri: str, body: str, cls: str = "internal", **kw: object) -> Record:
    return Record(source_uri=uri, body=body, classification=cls, file="f", line=1, **kw)  # type: ignore[arg-type]


def fid(n: int) -> UUID:
    return UUID(int=n)


def found(
    uri: str, body: str, n: int, cls: str = "internal", current: bool | None = None
) -> Existing:
    return Existing(
        source_uri=uri,
        fragment_id=fid(n),
        content_digest=body_digest(body),
        classification=cls,
        embedding_current=current,
    )


def test_a_new_source_is_inserted() -> None:
    plan = plan_batch([rec("a#1", "alpha")], [])
    (step,) = plan.steps
    assert (step.action, step.replaces, step.keep, step.embed) == ("insert", (), None, False)
    assert plan.writes == plan.steps


def test_the_same_content_and_classification_is_unchanged_and_writes_nothing() -> None:
    plan = plan_batch([rec("a#1", "alpha")], [found("a#1", "alpha", 7)])
    (step,) = plan.steps
    assert (step.action, step.keep, step.replaces) == ("unchanged", fid(7), ())
    assert plan.writes == ()


def test_changed_content_supersedes_every_active_fragment_of_the_source() -> None:
    plan = plan_batch(
        [rec("a#1", "alpha v2")], [found("a#1", "alpha", 7), found("a#1", "alpha old", 8)]
    )
    (step,) = plan.steps
    assert step.action == "supersede"
    assert step.replaces == (fid(7), fid(8))
    assert step.keep is None


def test_a_changed_classification_supersedes_even_with_the_same_body() -> None:
    plan = plan_batch([rec("a#1", "alpha", "confidential")], [found("a#1", "alpha", 7)])
    assert plan.steps[0].action == "supersede"
    assert plan.steps[0].replaces == (fid(7),)


def test_an_unchanged_source_with_a_second_active_fragment_supersedes_it_by_the_kept_one() -> None:
    plan = plan_batch([rec("a#1", "alpha")], [found("a#1", "other", 8), found("a#1", "alpha", 7)])
    (step,) = plan.steps
    assert (step.action, step.keep, step.replaces) == ("unchanged", fid(7), (fid(8),))
    assert plan.writes == (step,)


def test_other_sources_found_do_not_affect_a_record() -> None:
    plan = plan_batch([rec("a#1", "alpha")], [found("b#1", "alpha", 9)])
    assert plan.steps[0].action == "insert"


def test_with_a_model_new_and_changed_records_are_embedded() -> None:
    plan = plan_batch(
        [rec("a#1", "new"), rec("b#1", "changed")], [found("b#1", "before", 3)], model=True
    )
    assert [(s.action, s.embed) for s in plan.steps] == [("insert", True), ("supersede", True)]


@pytest.mark.parametrize(("current", "embed"), [(True, False), (False, True), (None, True)])
def test_with_a_model_an_unchanged_record_is_embedded_unless_its_embedding_is_current(
    current: bool | None, embed: bool
) -> None:
    plan = plan_batch(
        [rec("a#1", "alpha")], [found("a#1", "alpha", 7, current=current)], model=True
    )
    (step,) = plan.steps
    assert (step.action, step.embed) == ("unchanged", embed)
    assert bool(plan.writes) is embed


def test_without_a_model_nothing_is_embedded() -> None:
    plan = plan_batch([rec("a#1", "alpha")], [found("a#1", "alpha", 7, current=False)])
    assert plan.steps[0].embed is False
    assert plan.writes == ()


def test_steps_keep_input_order_and_indexes() -> None:
    records = [rec(f"x#{i}", f"body {i}") for i in range(5)]
    plan = plan_batch(records, [found("x#3", "body 3", 1)])
    assert [s.index for s in plan.steps] == [0, 1, 2, 3, 4]
    assert [s.record for s in plan.steps] == records
    assert [s.action for s in plan.steps] == ["insert"] * 3 + ["unchanged", "insert"]


def test_a_text_file_probes_the_position_after_its_last_fragment() -> None:
    records = [
        rec("notes/a.md#1", "one"),
        rec("notes/a.md#2", "two", retract_beyond=("notes/a.md#", 2)),
        rec("notes/b.md#1", "b", retract_beyond=("notes/b.md#", 1)),
    ]
    assert probes_of(records) == {
        "notes/a.md#3": ("notes/a.md#", 2),
        "notes/b.md#2": ("notes/b.md#", 1),
    }
    assert lookup_uris(records) == [
        "notes/a.md#1",
        "notes/a.md#2",
        "notes/b.md#1",
        "notes/a.md#3",
        "notes/b.md#2",
    ]
    # Only a file whose next position is active has shrunk.
    plan = plan_batch(records, [found("notes/a.md#3", "three", 5)])
    assert dict(plan.probes) == {"notes/a.md#3": ("notes/a.md#", 2)}
    assert plan_batch(records, []).probes == {}


def test_surplus_is_every_position_above_the_new_count_of_that_file_only() -> None:
    active = [
        (fid(1), "notes/a.md#2"),
        (fid(2), "notes/a.md#3"),
        (fid(3), "notes/a.md#10"),
        (fid(4), "notes/a.md#x"),
        (fid(5), "notes/a.md.bak#9"),
        (fid(6), "notes/b.md#5"),
    ]
    assert select_surplus(active, {"notes/a.md#": 2}) == [fid(2), fid(3)]
    assert select_surplus(active, {}) == []


def test_like_prefix_escapes_like_wildcards() -> None:
    assert like_prefix("a_b%c\\d#") == "a\\_b\\%c\\\\d#%"


def test_sync_retracts_what_the_input_no_longer_holds_except_documents_with_problems() -> None:
    active = [
        (fid(1), "s/a.md#1"),
        (fid(2), "s/b.md#1"),
        (fid(3), "s/c.md#1"),
        (fid(4), "s/c.md#2"),
    ]
    seen = {"s/a.md#1"}
    problems = [IngestIssue("s/b.md", None, "the file is not valid UTF-8")]
    gone = select_gone(active, seen=seen, errors=problems, kind="text")
    assert gone == [(fid(3), "s/c.md#1"), (fid(4), "s/c.md#2")]
    assert documents_removed(gone, kind="text") == ["s/c.md"]
    # For JSONL, a malformed line may be any record: any problem keeps everything.
    assert select_gone(active, seen=seen, errors=problems, kind="jsonl") == []
    gone = select_gone(active, seen=seen, errors=[], kind="jsonl")
    assert documents_removed(gone, kind="jsonl") == ["s/b.md#1", "s/c.md#1", "s/c.md#2"]


def test_a_document_is_its_source_uri_up_to_the_last_hash() -> None:
    assert document_of("notes/a.md#2") == "notes/a.md"
    assert document_of("c.jsonl#doc1") == "c.jsonl"
    assert document_of("odd#name.md#12") == "odd#name.md"
    assert document_of("plain") == "plain"


def test_legacy_documents_are_found_by_their_first_fragment() -> None:
    assert legacy_firsts(["a.md", "sub/b.txt"]) == ["a.md#1", "sub/b.txt#1"]


def test_legacy_fragments_are_the_numbered_positions_this_run_did_not_write() -> None:
    active = [
        (fid(1), "a.md#1"),
        (fid(2), "a.md#2"),
        (fid(3), "a.md#notes"),  # not a position of the old scheme
        (fid(4), "a.md.bak#1"),  # another document that shares the prefix
        (fid(5), "docs/x.md#1"),  # written by this run under its new name
        (fid(6), "docs/x.md#2"),
    ]
    gone = select_legacy(active, documents={"a.md", "docs/x.md"}, seen={"docs/x.md#1"})
    assert gone == [fid(1), fid(2), fid(6)]


def test_tally_counts_an_insert_onto_existing_or_repeated_content_as_unchanged() -> None:
    records = [rec("a#1", "same"), rec("b#1", "same"), rec("c#1", "other"), rec("d#1", "x")]
    plan = plan_batch(records, [found("c#1", "before", 9), found("d#1", "x", 4)])
    outcomes = [
        Outcome(index=0, fragment_id=fid(1), created=True, embedded=True),
        # The same body as record 0: the database returned record 0's fragment.
        Outcome(index=1, fragment_id=fid(1), created=True),
        Outcome(index=2, fragment_id=fid(2), created=True),
    ]
    result = tally(plan, outcomes)
    assert (result.inserted, result.unchanged, result.superseded, result.embedded) == (1, 2, 1, 1)
    assert result.inserted + result.unchanged + result.superseded == len(records)


def test_tally_counts_content_active_before_the_batch_as_unchanged() -> None:
    plan = plan_batch([rec("a#1", "shared")], [])
    result = tally(plan, [Outcome(index=0, fragment_id=fid(1), created=False)])
    assert (result.inserted, result.unchanged) == (0, 1)


def test_tally_refuses_an_insert_without_an_outcome() -> None:
    plan = plan_batch([rec("a#1", "alpha")], [])
    with pytest.raises(ValueError, match="no outcome"):
        tally(plan, [])


_PROBE = """
import importlib, sys, types
root = sys.argv[2]
for name, path in (("pyretrieve", root), ("pyretrieve.ingest", root + "/ingest")):
    package = types.ModuleType(name)
    package.__path__ = [path]
    sys.modules[name] = package
importlib.import_module(sys.argv[1])
print(",".join(sorted(
    n for n in sys.modules
    if n.split(".")[0] in ("psycopg", "psycopg_pool", "pgvector", "sqlalchemy", "numpy")
    or n.startswith(("pyretrieve.db", "pyretrieve.ingest.executor", "pyretrieve.ingest.ingestor"))
)))
print(sys.argv[1] in sys.modules)
"""


def _probe(module: str) -> tuple[str, str]:
    package_dir = str(Path(plan_module.__file__).resolve().parents[1])
    completed = subprocess.run(
        [sys.executable, "-c", _PROBE, module, package_dir],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded, imported = completed.stdout.splitlines()
    return loaded, imported


def test_the_planner_imports_nothing_of_the_database_layer() -> None:
    assert _probe("pyretrieve.ingest.plan") == ("", "True")


def test_the_import_probe_sees_the_executor_import_the_driver() -> None:
    loaded, imported = _probe("pyretrieve.ingest.executor")
    assert imported == "True"
    assert "psycopg" in loaded.split(",")
