"""Adapters for Python frameworks, each behind its own extra.

* :mod:`pyretrieve.integrations.langchain` (``pip install 'pyretrieve[langchain]'``): a
  LangChain ``BaseRetriever`` and an ingest helper for LangChain ``Document`` objects.
* :mod:`pyretrieve.integrations.llamaindex` (``pip install 'pyretrieve[llamaindex]'``): a
  LlamaIndex ``BaseRetriever`` and an ingest helper for LlamaIndex nodes.

Both search through :class:`pyretrieve.Retriever` as one principal in one scope, both fixed
when the adapter is made, and label every returned text as untrusted data. This package
imports neither framework; each module imports its own.
"""
