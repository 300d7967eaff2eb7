"""Adapters for Python frameworks, each but SQLAlchemy behind its own extra.

* :mod:`pyretrieve.integrations.langchain` (``pip install 'pyretrieve[langchain]'``): a
  LangChain ``BaseRetriever`` and an ingest helper for LangChain ``Document`` objects.
* :mod:`pyretrieve.integrations.llamaindex` (``pip install 'pyretrieve[llamaindex]'``): a
  LlamaIndex ``BaseRetriever`` and an ingest helper for LlamaIndex nodes.
* :mod:`pyretrieve.integrations.sqlalchemy` (no extra: SQLAlchemy is a dependency): the SQL
  API as typed SQLAlchemy Core constructs, for an application that calls it inside its own
  transactions (``docs/sqlalchemy.md``).

The LangChain and LlamaIndex adapters search through :class:`pyretrieve.Retriever` as one
principal in one scope, both fixed when the adapter is made, and label every returned text as
untrusted data. This package
imports no framework; each module imports its own.
"""
