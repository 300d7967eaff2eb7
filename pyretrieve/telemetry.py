"""OpenTelemetry spans, when ``opentelemetry-api`` is installed (``pyretrieve[otel]``).

Without it every function here does nothing, at the cost of a call. With it, each request is
one span (``pyretrieve.search``, ``pyretrieve.discover_tools``, ``pyretrieve.rediscover_tool``,
``pyretrieve.ingest_batch``) whose children are the legs of the request (``pyretrieve.embed``,
``pyretrieve.authorize``, ``pyretrieve.lexical``, ``pyretrieve.vector``, ``pyretrieve.records``,
``pyretrieve.fuse``), through the global tracer provider the application configures; the
tool-discovery events of :mod:`pyretrieve.tools.events` become events of the current span.

What a span carries is the scope (workspace, project, purpose), the mode and options, counts,
the semantic status and degradation reason, the decision id, error codes and elapsed
milliseconds: scalars of pyretrieve's own vocabulary. Never the query text, a fragment's
content, an embedding, a tool's name or schema: attributes end up in tracing back ends that
sit outside the policy boundary. An exception is recorded as its stable code (``error.type``)
only; OpenTelemetry's own exception events, which copy the message and the stack, are off.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from pyretrieve.errors import PyretrieveError

try:
    from opentelemetry import trace as _trace
    from opentelemetry.trace import Status, StatusCode
except ImportError:  # the otel extra is not installed: telemetry is off
    _trace = None  # type: ignore[assignment,unused-ignore]

if TYPE_CHECKING:
    from pyretrieve.request import SearchRequest
    from pyretrieve.tools.service import Discovery
    from pyretrieve.types import Decision, Scope, SearchResult, SemanticStatus

__all__ = [
    "ENABLED",
    "PREFIX",
    "TRACER_NAME",
    "Span",
    "annotate",
    "decision_attributes",
    "discovery_attributes",
    "event",
    "leg",
    "request_attributes",
    "result_attributes",
    "scope_attributes",
    "span",
    "vector_attributes",
]

ENABLED: Final = _trace is not None
TRACER_NAME: Final = "pyretrieve"
PREFIX: Final = "pyretrieve."

Scalar: TypeAlias = bool | int | float | str


def _attributes(values: Mapping[str, Scalar | None]) -> dict[str, Scalar]:
    # Every key gets the pyretrieve prefix; None means "not known here" and is left out.
    out: dict[str, Scalar] = {}
    for key, value in values.items():
        if value is None:
            continue
        if not isinstance(value, bool | int | float | str):
            raise TypeError(f"telemetry attribute {key} must be a scalar")
        out[PREFIX + key] = value
    return out


class Span:
    """The span of a block (a no-op without OpenTelemetry)."""

    __slots__ = ("_span",)

    def __init__(self, span: Any | None) -> None:
        self._span = span

    def set(self, **attributes: Scalar | None) -> None:
        """Set attributes (prefixed ``pyretrieve.``; ``None`` values are left out)."""
        if self._span is not None:
            self._span.set_attributes(_attributes(attributes))

    def event(self, name: str, **attributes: Scalar | None) -> None:
        if self._span is not None:
            self._span.add_event(name, _attributes(attributes))


_NULL: Final = Span(None)


@contextmanager
def span(name: str, **attributes: Scalar | None) -> Iterator[Span]:
    """A span named ``pyretrieve.<name>`` around the block, a child of the current span.

    An exception leaving the block marks the span as failed with the error's stable code
    (``error.type``: the :class:`~pyretrieve.PyretrieveError` code, also for a driver error
    the request will translate, else the exception's class name) and nothing of its message.
    """
    if _trace is None:
        yield _NULL
        return
    tracer = _trace.get_tracer(TRACER_NAME)
    started = time.perf_counter()
    with tracer.start_as_current_span(
        PREFIX + name,
        attributes=_attributes(attributes),
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        handle = Span(current)
        try:
            yield handle
        except BaseException as exc:
            code = _error_code(exc)
            current.set_attribute("error.type", code)
            current.set_status(Status(StatusCode.ERROR, code))
            raise
        finally:
            handle.set(elapsed_ms=round((time.perf_counter() - started) * 1000.0, 3))


def _error_code(exc: BaseException) -> str:
    # A leg sees the driver's error before the request translates it: the typed error's code
    # is the same either way, and the driver's text is never read.
    if isinstance(exc, PyretrieveError):
        return exc.code
    import psycopg

    from pyretrieve.db.errors import translate

    if isinstance(exc, psycopg.Error):
        return translate(exc).code
    return type(exc).__name__


def leg(name: str, **attributes: Scalar | None) -> AbstractContextManager[Span]:
    """The span of one leg of a request (``pyretrieve.authorize``, ``pyretrieve.lexical``,
    ...): :func:`span` under another name, so the call sites read as what they are."""
    return span(name, **attributes)


def annotate(**attributes: Scalar | None) -> None:
    """Set attributes on the current span (the request's, between its legs)."""
    if _trace is not None:
        Span(_trace.get_current_span()).set(**attributes)


def event(name: str, attributes: Mapping[str, Scalar | None]) -> None:
    """A telemetry event: an event of the current span, or a span of its own (named
    ``pyretrieve.<name>``) when no span is being recorded."""
    if _trace is None:
        return
    current = _trace.get_current_span()
    if current.is_recording():
        current.add_event(name, _attributes(attributes))
        return
    with span(name, **attributes):
        pass


def scope_attributes(scope: Scope) -> dict[str, Scalar | None]:
    """The scope a request names."""
    return {"workspace": scope.workspace, "project": scope.project, "purpose": scope.purpose}


def request_attributes(request: SearchRequest) -> dict[str, Scalar | None]:
    """A search request as span attributes: its scope and options, never its query."""
    return {
        **scope_attributes(request.scope),
        "mode": request.mode,
        "semantic": request.semantic,
        "limit": request.limit,
        "candidate_limit": request.candidate_limit,
        "ranking": request.ranking,
        "model": request.model,
        "embedding_given": request.embedding is not None,
    }


def decision_attributes(decision: Decision) -> dict[str, Scalar | None]:
    """What a decision adds to the authorize leg: its bounds, not its grant."""
    return {
        "candidate_limit": decision.candidate_limit,
        "semantic_policy": decision.semantic_policy,
    }


def vector_attributes(
    rows: Sequence[Any] | None, status: SemanticStatus
) -> dict[str, Scalar | None]:
    """The vector leg's outcome: candidates (when it ran), status and degradation reason."""
    return {
        "candidates": None if rows is None else len(rows),
        "status": status.status.value,
        "reason": None if status.reason is None else status.reason.value,
    }


def result_attributes(result: SearchResult) -> dict[str, Scalar | None]:
    """A search result as span attributes: counts, the semantic status and the decision."""
    semantic = result.semantic
    return {
        "decision_id": str(result.decision.decision_id),
        "retrieval_id": result.retrieval_id,
        "results": len(result.results),
        "omissions": len(result.omissions),
        "lexical_ran": result.lexical_ran,
        "vector_ran": result.vector_ran,
        "semantic.status": semantic.status.value,
        "semantic.reason": None if semantic.reason is None else semantic.reason.value,
        "degraded": semantic.status.value == "degraded",
    }


def discovery_attributes(discovery: Discovery) -> dict[str, Scalar | None]:
    """A tool discovery's outcome: counts, K, confidence and rollout, never a tool's name."""
    return {
        "tools.candidates": len(discovery.ranked),
        "tools.k": discovery.k,
        "tools.recommended_k": discovery.confidence.recommended_k,
        "tools.level": discovery.confidence.level,
        "tools.stage": discovery.stage,
        "tools.applied": discovery.applied,
        "tools.omissions": len(discovery.omissions),
        "tools.schema_tokens": discovery.schema_tokens,
    }
