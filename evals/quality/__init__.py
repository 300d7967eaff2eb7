"""Retrieval quality on public test collections: ``python -m evals.quality --help``.

Ingests a BEIR-layout collection through pyretrieve's own ingestion into a fresh scope,
searches every judged query through ``Retriever.search`` as a granted reader, and scores the
runs with ir-measures (nDCG@10, Recall@100, MRR@10) per mode and embedder, with latency.
Results go to ``evals/quality/<dataset>.json`` and ``docs/quality.md``.
"""
