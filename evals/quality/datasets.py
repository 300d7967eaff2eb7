"""Test collections in BEIR layout: the named ones under ``../shared/datasets/`` and any folder.

A collection is read at run time from where it lives and never copied into the repository.
Ingestion needs a BEIR folder (``corpus.jsonl[.gz]``); the Gorilla APIBench splits and the
``--quick`` slice are written as one into a temporary directory first.

Gorilla: ``retrieval_view/`` holds corpus/queries/qrels per split; when it is absent the view
is built the way that folder was: the corpus is ``api/<split>_api.jsonl`` (``_id`` =
``<split>-<row>``, title = ``api_name``, text = the row's JSON), each ``apibench/*_eval.json``
row is a query (id ``<split>-q<row>``) (its instruction, the text after ``###Instruction:`` up to ``###Output``) whose
relevant documents are the API rows whose JSON equals its ``api_data``; rows with no match are
dropped. (Checked against ``retrieval_view/``: identical corpus and qrels; 10 of 1,708 query
texts differ, where the view kept a whole eval row whose markers are spelled with a space.)
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evals.bench.runtime import DATASETS, display_path

GORILLA = {
    "gorilla-torchhub": ("torchhub", "torchhub"),
    "gorilla-tfhub": ("tensorflowhub", "tensorflow"),
    "gorilla-huggingface": ("huggingface", "huggingface"),
}
NAMED = ("scifact", "cranfield", *GORILLA, "bfcl-tools")
_OUTPUT = re.compile(r"###\s*Output")
_INSTRUCTION = re.compile(r"^\s*###\s*Instruction:")


@dataclass
class Collection:
    name: str
    source: str  # where it was read from, relative to the repository's parent
    docs: dict[str, tuple[str, str]]  # doc id -> (title, text), in corpus order
    queries: dict[str, str]  # judged queries only
    qrels: dict[str, dict[str, int]]  # query id -> doc id -> grade (> 0 only)
    notes: list[str] = field(default_factory=list)
    # The BEIR folder holding exactly this corpus, which ingestion can read as it is.
    folder: Path | None = None

    def body(self, doc_id: str) -> str:
        """The fragment body ``Ingestor`` makes from a BEIR record."""
        title, text = self.docs[doc_id]
        return f"{title}\n\n{text}" if title and title.strip() else text

    def write_beir(self, folder: Path) -> Path:
        """The corpus as a BEIR folder (``corpus.jsonl``) for ingestion; returns the folder."""
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / "corpus.jsonl").open("w", encoding="utf-8") as fh:
            for doc_id, (title, text) in self.docs.items():
                fh.write(json.dumps({"_id": doc_id, "title": title, "text": text}) + "\n")
        return folder

    def duplicate_groups(self) -> dict[str, list[str]]:
        """doc id -> every doc id with the same body (only for bodies shared by several docs).

        Ingestion keeps one fragment per distinct body in a scope, under the first doc's id; a
        result for it stands for all of them, as it would for a ranker that returned each.
        """
        by_body: dict[bytes, list[str]] = {}
        for doc_id in self.docs:
            body = self.body(doc_id)
            if body.strip():
                by_body.setdefault(hashlib.sha256(body.encode()).digest(), []).append(doc_id)
        return {d: group for group in by_body.values() if len(group) > 1 for d in group}


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _first(folder: Path, *names: str) -> Path:
    for name in names:
        if (folder / name).exists():
            return folder / name
    raise FileNotFoundError(f"none of {', '.join(names)} in {display_path(folder)}")


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as fh:
        rows = csv.reader(fh, delimiter="\t")
        for row in rows:
            if not row or row[0] == "query-id":
                continue
            grade = int(float(row[2]))
            if grade > 0:
                qrels.setdefault(row[0], {})[row[1]] = grade
    return qrels


def read_beir(folder: Path, *, name: str | None = None, split: str = "test") -> Collection:
    """A BEIR folder: corpus.jsonl[.gz], queries.jsonl[.gz], qrels/<split>.tsv."""
    corpus = _first(folder, "corpus.jsonl", "corpus.jsonl.gz")
    queries_path = _first(folder, "queries.jsonl", "queries.jsonl.gz")
    qrels = _read_qrels(_first(folder / "qrels", f"{split}.tsv"))
    docs = {str(d["_id"]): (d.get("title") or "", d.get("text") or "") for d in _lines(corpus)}
    texts = {str(q["_id"]): str(q["text"]) for q in _lines(queries_path)}
    missing = [q for q in qrels if q not in texts]
    queries = {q: texts[q] for q in qrels if q in texts}
    notes = [f"{len(queries)} judged queries from qrels/{split}.tsv"]
    if missing:
        notes.append(f"{len(missing)} judged query ids have no text and are skipped")
    return Collection(
        name=name or folder.name,
        source=display_path(folder),
        docs=docs,
        queries=queries,
        qrels={q: qrels[q] for q in queries},
        notes=notes,
        folder=folder,
    )


def _gorilla_view(datasets: Path, prefix: str) -> Collection | None:
    view = datasets / "gorilla_apibench" / "retrieval_view"
    files = [view / f"{prefix}_{part}" for part in ("corpus.jsonl", "queries.jsonl")]
    qrels_path = view / f"{prefix}_qrels_test.tsv"
    if not all(p.exists() for p in [*files, qrels_path]):
        return None
    docs = {str(d["_id"]): (d.get("title") or "", d.get("text") or "") for d in _lines(files[0])}
    texts = {str(q["_id"]): str(q["text"]) for q in _lines(files[1])}
    qrels = _read_qrels(qrels_path)
    queries = {q: texts[q] for q in texts if q in qrels}
    return Collection(
        name="",
        source=display_path(view) + f"/{prefix}_*",
        docs=docs,
        queries=queries,
        qrels={q: qrels[q] for q in queries},
        notes=["retrieval_view (BEIR layout)"],
    )


def build_gorilla(datasets: Path, prefix: str, eval_name: str) -> Collection:
    """The BEIR view of one APIBench split, built from ``api/`` and ``apibench/``."""
    root = datasets / "gorilla_apibench"
    api = [
        json.loads(line) for line in (root / "api" / f"{prefix}_api.jsonl").open() if line.strip()
    ]
    docs: dict[str, tuple[str, str]] = {}
    by_json: dict[str, list[str]] = {}
    for row_number, row in enumerate(api):
        doc_id = f"{prefix}-{row_number}"
        docs[doc_id] = (str(row.get("api_name") or ""), json.dumps(row, ensure_ascii=False))
        by_json.setdefault(json.dumps(row, sort_keys=True), []).append(doc_id)
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    dropped = 0
    eval_path = root / "apibench" / f"{eval_name}_eval.json"
    rows = [json.loads(line) for line in eval_path.open(encoding="utf-8") if line.strip()]
    for row_number, row in enumerate(rows):
        relevant = by_json.get(json.dumps(row.get("api_data"), sort_keys=True))
        instruction = instruction_text(str(row.get("code") or ""))
        if not relevant or not instruction:
            dropped += 1
            continue
        qid = f"{prefix}-q{row_number}"
        queries[qid] = instruction
        qrels[qid] = dict.fromkeys(relevant, 1)
    return Collection(
        name="",
        source=display_path(root) + f"/{{api,apibench}}/{prefix}*",
        docs=docs,
        queries=queries,
        qrels=qrels,
        notes=[
            "BEIR view built at run time from api/ and apibench/",
            f"{dropped} eval rows without a matching API row dropped",
        ],
    )


def instruction_text(code: str) -> str:
    """The instruction of an APIBench eval row: before ``###Output``, without its marker."""
    return _INSTRUCTION.sub("", _OUTPUT.split(code, maxsplit=1)[0]).strip()


def load(dataset: str, *, datasets: Path = DATASETS, split: str = "test") -> Collection:
    """A named collection (see ``NAMED``) or a BEIR folder given by path."""
    if dataset == "scifact":
        collection = read_beir(datasets / "scifact", name="scifact", split="test")
        collection.notes.append("SciFact: evaluated on the ids in qrels/test.tsv")
        return collection
    if dataset == "cranfield":
        return read_beir(datasets / "cranfield" / "beir_format", name="cranfield", split="test")
    if dataset == "bfcl-tools":
        # Strict qrels: the tools the ground truth calls, not same-named variants.
        return read_beir(datasets / "bfcl_tools", name="bfcl-tools", split="test")
    if dataset in GORILLA:
        prefix, eval_name = GORILLA[dataset]
        collection = _gorilla_view(datasets, prefix) or build_gorilla(datasets, prefix, eval_name)
        collection.name = dataset
        duplicates = len(collection.duplicate_groups())
        if duplicates:
            collection.notes.append(f"{duplicates} API rows share their JSON with another row")
        calls = set()
        for _title, text in collection.docs.values():
            with contextlib.suppress(ValueError, AttributeError):
                calls.add(str(json.loads(text).get("api_call")))
        if len(calls) < len(collection.docs):
            collection.notes.append(
                f"only {len(calls)} distinct api_call values among {len(collection.docs)} API"
                " rows: the qrels name one row, so a near-duplicate ranked above it is a miss"
            )
        return collection
    folder = Path(dataset)
    if folder.is_dir():
        return read_beir(folder, name=slug(folder.name), split=split)
    raise FileNotFoundError(f"unknown dataset {dataset!r}: use one of {', '.join(NAMED)} or a path")


def quick_slice(collection: Collection, *, docs: int = 200, queries: int = 10) -> Collection:
    """A small, self-consistent slice: the first judged queries and their relevant documents,
    topped up with other documents in corpus order."""
    chosen_queries = list(collection.queries)[:queries]
    keep: dict[str, None] = {}
    for q in chosen_queries:
        for d in collection.qrels[q]:
            if d in collection.docs:
                keep[d] = None
    for d in collection.docs:
        if len(keep) >= docs:
            break
        keep[d] = None
    return Collection(
        name=collection.name,
        source=collection.source,
        docs={d: collection.docs[d] for d in collection.docs if d in keep},
        queries={q: collection.queries[q] for q in chosen_queries},
        qrels={
            q: {d: g for d, g in collection.qrels[q].items() if d in keep} for q in chosen_queries
        },
        notes=[*collection.notes, f"quick slice: {len(keep)} documents, {queries} queries"],
    )


def slug(text: str) -> str:
    value = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return value or "collection"
