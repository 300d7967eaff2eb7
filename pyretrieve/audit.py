"""The DBA's audit: read the ``pyretrieve.audit_*`` views and render what they say.

The views (sql/migrations/0002_audit.sql) do the work, so a DBA who only speaks SQL gets the
same answer as ``pyretrieve audit``: every table's row-level security state, every policy,
privilege, function, view and key, the roles that reach SUPERUSER or BYPASSRLS, the access
matrix, and the findings that weaken isolation, each with its evidence and a fix.

:func:`read_report` returns an :class:`AuditReport` of frozen dataclasses; :func:`render_text`
(rich tables), :func:`render_markdown`, :func:`render_json` (canonical JSON, stable order)
and :func:`render_html` (one self-contained page: the access matrix coloured by ceiling, the
findings with their fixes, the inventory) render it. Read the views as a member of ``pyretrieve_admin`` or as a superuser: the access
matrix reads ``pyretrieve.grants``, where only they see every grant.
"""

from __future__ import annotations

import html
import io
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Literal, TypeAlias
from uuid import UUID

import psycopg
from psycopg.rows import dict_row
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pyretrieve.db import queries
from pyretrieve.errors import InternalError, PyretrieveError
from pyretrieve.types import JsonValue, canonical_json, iso_utc, micros

__all__ = [
    "SEVERITIES",
    "AccessEntry",
    "AuditReport",
    "Finding",
    "FunctionAudit",
    "KeyAudit",
    "NotInstalled",
    "ObjectAudit",
    "PolicyAudit",
    "PrivilegeAudit",
    "RoleAudit",
    "ServerAudit",
    "Severity",
    "TableAudit",
    "ViewAudit",
    "access_matrix",
    "cell_ceiling",
    "read_report",
    "render_html",
    "render_json",
    "render_markdown",
    "render_text",
    "text_report",
]

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")
_RANK: dict[str, int] = {s: i for i, s in enumerate(SEVERITIES)}


class NotInstalled(PyretrieveError):
    """The database has no pyretrieve schema, or one older than the audit views."""

    code = "VES_MEMORY_NOT_INSTALLED"
    default_message = "pyretrieve is not installed in this database (run `pyretrieve install`)"


# ------------------------------------------------------------------ row parsing

# One row of a view, as psycopg's dict_row gives it.
_Row: TypeAlias = Mapping[str, object]


def _bad(name: str) -> InternalError:
    return InternalError(f"unexpected audit view value for {name}")


def _str(row: Mapping[str, object], name: str) -> str:
    value = row[name]
    if not isinstance(value, str):
        raise _bad(name)
    return value


def _opt_str(row: Mapping[str, object], name: str) -> str | None:
    return None if row[name] is None else _str(row, name)


def _bool(row: Mapping[str, object], name: str) -> bool:
    value = row[name]
    if not isinstance(value, bool):
        raise _bad(name)
    return value


def _int(row: Mapping[str, object], name: str) -> int:
    value = row[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(name)
    return value


def _strs(row: Mapping[str, object], name: str) -> tuple[str, ...]:
    value = row[name]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(name)
    return tuple(value)


# ------------------------------------------------------------------ the report


@dataclass(frozen=True)
class ServerAudit:
    """The server version against the minimum minor release that fixes the RLS CVEs."""

    server_version: str
    server_version_num: int
    major: int
    minimum_version: str | None
    meets_minimum: bool
    fixes: str

    @classmethod
    def from_row(cls, r: _Row) -> ServerAudit:
        return cls(
            _str(r, "server_version"),
            _int(r, "server_version_num"),
            _int(r, "major"),
            _opt_str(r, "minimum_version"),
            _bool(r, "meets_minimum"),
            _str(r, "fixes"),
        )


@dataclass(frozen=True)
class TableAudit:
    table_name: str
    owner: str
    rls_enabled: bool
    rls_forced: bool
    policies: int
    permissive_policies: int
    restrictive_policies: int
    has_workspace_id: bool
    # For a partition (of pyretrieve.decisions): the table it is read through.
    partition_of: str | None = None

    order: ClassVar[str] = "table_name"

    @classmethod
    def from_row(cls, r: _Row) -> TableAudit:
        return cls(
            _str(r, "table_name"),
            _str(r, "owner"),
            _bool(r, "rls_enabled"),
            _bool(r, "rls_forced"),
            _int(r, "policies"),
            _int(r, "permissive_policies"),
            _int(r, "restrictive_policies"),
            _bool(r, "has_workspace_id"),
            _opt_str(r, "partition_of"),
        )


@dataclass(frozen=True)
class PolicyAudit:
    table_name: str
    policy_name: str
    command: str
    permissive: bool
    roles: tuple[str, ...]
    using_expr: str | None
    with_check_expr: str | None
    per_row_calls: tuple[str, ...]
    trusts_settings_in: tuple[str, ...]
    reads_binding_twice: tuple[str, ...]

    order: ClassVar[str] = "table_name, policy_name"

    @classmethod
    def from_row(cls, r: _Row) -> PolicyAudit:
        return cls(
            _str(r, "table_name"),
            _str(r, "policy_name"),
            _str(r, "command"),
            _bool(r, "permissive"),
            _strs(r, "roles"),
            _opt_str(r, "using_expr"),
            _opt_str(r, "with_check_expr"),
            _strs(r, "per_row_calls"),
            _strs(r, "trusts_settings_in"),
            _strs(r, "reads_binding_twice"),
        )


@dataclass(frozen=True)
class PrivilegeAudit:
    object_type: str
    object: str
    column_name: str | None
    grantee: str
    privilege: str
    grantable: bool
    grantor: str
    grantee_is_owner: bool

    order: ClassVar[str] = "object, column_name NULLS FIRST, grantee, privilege, grantor"

    @classmethod
    def from_row(cls, r: _Row) -> PrivilegeAudit:
        return cls(
            _str(r, "object_type"),
            _str(r, "object"),
            _opt_str(r, "column_name"),
            _str(r, "grantee"),
            _str(r, "privilege"),
            _bool(r, "grantable"),
            _str(r, "grantor"),
            _bool(r, "grantee_is_owner"),
        )


@dataclass(frozen=True)
class FunctionAudit:
    function_name: str
    kind: str
    owner: str
    language: str
    volatility: str
    security_definer: bool
    search_path: str | None
    leakproof: bool
    executable_by: tuple[str, ...]
    public_execute: bool
    description: str | None

    order: ClassVar[str] = "function_name"

    @classmethod
    def from_row(cls, r: _Row) -> FunctionAudit:
        return cls(
            _str(r, "function_name"),
            _str(r, "kind"),
            _str(r, "owner"),
            _str(r, "language"),
            _str(r, "volatility"),
            _bool(r, "security_definer"),
            _opt_str(r, "search_path"),
            _bool(r, "leakproof"),
            _strs(r, "executable_by"),
            _bool(r, "public_execute"),
            _opt_str(r, "description"),
        )


@dataclass(frozen=True)
class ViewAudit:
    view_name: str
    owner: str
    security_invoker: bool
    security_barrier: bool

    order: ClassVar[str] = "view_name"

    @classmethod
    def from_row(cls, r: _Row) -> ViewAudit:
        return cls(
            _str(r, "view_name"),
            _str(r, "owner"),
            _bool(r, "security_invoker"),
            _bool(r, "security_barrier"),
        )


@dataclass(frozen=True)
class KeyAudit:
    table_name: str
    index_name: str
    kind: str
    key_columns: tuple[str, ...]
    table_has_workspace_id: bool
    leads_with_workspace_id: bool
    writable_by: tuple[str, ...]

    order: ClassVar[str] = "table_name, index_name"

    @classmethod
    def from_row(cls, r: _Row) -> KeyAudit:
        return cls(
            _str(r, "table_name"),
            _str(r, "index_name"),
            _str(r, "kind"),
            _strs(r, "key_columns"),
            _bool(r, "table_has_workspace_id"),
            _bool(r, "leads_with_workspace_id"),
            _strs(r, "writable_by"),
        )


@dataclass(frozen=True)
class ObjectAudit:
    object_type: str
    object: str
    owner: str
    owner_can_login: bool
    owner_is_superuser: bool

    order: ClassVar[str] = "object_type, object"

    @classmethod
    def from_row(cls, r: _Row) -> ObjectAudit:
        return cls(
            _str(r, "object_type"),
            _str(r, "object"),
            _str(r, "owner"),
            _bool(r, "owner_can_login"),
            _bool(r, "owner_is_superuser"),
        )


@dataclass(frozen=True)
class RoleAudit:
    role_name: str
    can_login: bool
    superuser: bool
    bypassrls: bool
    reaches_superuser: bool
    superuser_via: str | None
    reaches_bypassrls: bool
    bypassrls_via: str | None
    app_groups: tuple[str, ...]
    bound_by_rls: bool
    can_become_owner: bool
    owner_via: str | None
    owned_objects: int

    order: ClassVar[str] = "role_name"

    @classmethod
    def from_row(cls, r: _Row) -> RoleAudit:
        return cls(
            _str(r, "role_name"),
            _bool(r, "can_login"),
            _bool(r, "superuser"),
            _bool(r, "bypassrls"),
            _bool(r, "reaches_superuser"),
            _opt_str(r, "superuser_via"),
            _bool(r, "reaches_bypassrls"),
            _opt_str(r, "bypassrls_via"),
            _strs(r, "app_groups"),
            _bool(r, "bound_by_rls"),
            _bool(r, "can_become_owner"),
            _opt_str(r, "owner_via"),
            _int(r, "owned_objects"),
        )


@dataclass(frozen=True)
class AccessEntry:
    """One row of the access matrix: a principal and one grant that applies to it."""

    principal: str
    granted_to: str
    through_membership: bool
    workspace_id: str
    project_id: str
    purpose: str
    can_read: bool
    can_write: bool
    ceiling: str
    max_age: timedelta | None
    semantic_policy: str
    expires_at: datetime | None
    live: bool
    grant_id: UUID

    order: ClassVar[str] = "principal, workspace_id, project_id, purpose, granted_to, grant_id"

    @classmethod
    def from_row(cls, r: _Row) -> AccessEntry:
        max_age, expires_at, grant_id = r["max_age"], r["expires_at"], r["grant_id"]
        if max_age is not None and not isinstance(max_age, timedelta):
            raise _bad("max_age")
        if expires_at is not None and not isinstance(expires_at, datetime):
            raise _bad("expires_at")
        if not isinstance(grant_id, UUID):
            raise _bad("grant_id")
        return cls(
            _str(r, "principal"),
            _str(r, "granted_to"),
            _bool(r, "through_membership"),
            _str(r, "workspace_id"),
            _str(r, "project_id"),
            _str(r, "purpose"),
            _bool(r, "can_read"),
            _bool(r, "can_write"),
            _str(r, "ceiling"),
            max_age,
            _str(r, "semantic_policy"),
            expires_at,
            _bool(r, "live"),
            grant_id,
        )


@dataclass(frozen=True)
class Finding:
    severity: Severity
    code: str
    object_type: str
    object: str
    evidence: str
    fix: str

    order: ClassVar[str] = (
        "CASE severity WHEN 'error' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, code, object, evidence"
    )

    @classmethod
    def from_row(cls, r: _Row) -> Finding:
        severity = _str(r, "severity")
        if severity == "error":
            level: Severity = "error"
        elif severity == "warning":
            level = "warning"
        elif severity == "info":
            level = "info"
        else:
            raise _bad("severity")
        return cls(
            level,
            _str(r, "code"),
            _str(r, "object_type"),
            _str(r, "object"),
            _str(r, "evidence"),
            _str(r, "fix"),
        )

    def at_least(self, severity: Severity) -> bool:
        """Whether this finding is as severe as ``severity`` or more."""
        return _RANK[self.severity] <= _RANK[severity]


@dataclass(frozen=True)
class AuditReport:
    server: ServerAudit
    tables: tuple[TableAudit, ...]
    policies: tuple[PolicyAudit, ...]
    privileges: tuple[PrivilegeAudit, ...]
    functions: tuple[FunctionAudit, ...]
    views: tuple[ViewAudit, ...]
    keys: tuple[KeyAudit, ...]
    objects: tuple[ObjectAudit, ...]
    roles: tuple[RoleAudit, ...]
    access: tuple[AccessEntry, ...]
    findings: tuple[Finding, ...]

    def counts(self) -> dict[str, int]:
        """Findings per severity, every severity present."""
        return {s: sum(1 for f in self.findings if f.severity == s) for s in SEVERITIES}

    def failing(self, fail_on: Severity) -> tuple[Finding, ...]:
        """The findings at or above ``fail_on``."""
        return tuple(f for f in self.findings if f.at_least(fail_on))

    def to_plain(self) -> dict[str, JsonValue]:
        return {
            "server": _plain(self.server),
            "summary": dict(self.counts()),
            "tables": [_plain(x) for x in self.tables],
            "policies": [_plain(x) for x in self.policies],
            "privileges": [_plain(x) for x in self.privileges],
            "functions": [_plain(x) for x in self.functions],
            "views": [_plain(x) for x in self.views],
            "keys": [_plain(x) for x in self.keys],
            "objects": [_plain(x) for x in self.objects],
            "roles": [_plain(x) for x in self.roles],
            "access": [_plain(x) for x in self.access],
            "findings": [_plain(x) for x in self.findings],
        }


def _plain_value(value: object) -> JsonValue:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, tuple):
        return [_plain_value(v) for v in value]
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, timedelta):
        return micros(value)
    if isinstance(value, UUID):
        return str(value)
    raise TypeError(f"no JSON rendering for {type(value).__name__}")


def _plain(obj: object) -> dict[str, JsonValue]:
    out: dict[str, JsonValue] = {}
    for name, value in vars(obj).items():
        # Durations are exact microsecond counts, and say so in their name.
        key = f"{name}_us" if isinstance(value, timedelta) or name == "max_age" else name
        out[key] = _plain_value(value)
    return out


# ------------------------------------------------------------------ reading

_SECTIONS: tuple[tuple[str, str, Callable[[_Row], Any], str], ...] = (
    ("tables", "audit_tables", TableAudit.from_row, TableAudit.order),
    ("policies", "audit_policies", PolicyAudit.from_row, PolicyAudit.order),
    ("privileges", "audit_privileges", PrivilegeAudit.from_row, PrivilegeAudit.order),
    ("functions", "audit_functions", FunctionAudit.from_row, FunctionAudit.order),
    ("views", "audit_views", ViewAudit.from_row, ViewAudit.order),
    ("keys", "audit_keys", KeyAudit.from_row, KeyAudit.order),
    ("objects", "audit_objects", ObjectAudit.from_row, ObjectAudit.order),
    ("roles", "audit_roles", RoleAudit.from_row, RoleAudit.order),
    ("access", "audit_access", AccessEntry.from_row, AccessEntry.order),
    ("findings", "audit_findings", Finding.from_row, Finding.order),
)


def read_report(conn: psycopg.Connection[Any], principal: str | None = None) -> AuditReport:
    """Read every audit view in one transaction, as ``principal`` when given (SET LOCAL ROLE).

    The search_path is pinned for the transaction so that the policy and function texts the
    server renders are the same from one run to the next. Raises :class:`NotInstalled` when
    the database has no pyretrieve schema, or one that predates the audit views.
    """
    with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
        cur.execute(queries.AUDIT_INSTALLED)
        state = cur.fetchone()
        if state is None or not state["schema"]:
            raise NotInstalled()
        if not state["audit"]:
            raise NotInstalled(
                "the pyretrieve schema predates the audit views (0002): "
                "run `pyretrieve install` to upgrade it"
            )
        cur.execute(queries.PIN_SEARCH_PATH_LOCAL)
        if principal:
            cur.execute(queries.set_local_role(principal))
        cur.execute(queries.AUDIT_SERVER)
        server_row = cur.fetchone()
        if server_row is None:
            raise _bad("audit_server")
        sections: dict[str, tuple[Any, ...]] = {}
        for key, view, parse, order in _SECTIONS:
            cur.execute(queries.audit_view(view, order))
            sections[key] = tuple(parse(row) for row in cur.fetchall())
    return AuditReport(server=ServerAudit.from_row(server_row), **sections)


# ------------------------------------------------------------------ rendering


def _yn(value: bool) -> str:
    return "yes" if value else "no"


def _join(values: Iterable[str]) -> str:
    return ", ".join(values)


def _one_line(text: str | None) -> str:
    return "" if text is None else " ".join(text.split())


def _server_line(report: AuditReport) -> str:
    s = report.server
    if s.meets_minimum:
        state = "meets the minimum" + (
            f" ({s.minimum_version})" if s.minimum_version else " (every 18.x carries the fixes)"
        )
    else:
        state = f"below the minimum {s.minimum_version or '(unsupported major version)'}"
    return f"PostgreSQL {s.server_version}: {state} for {s.fixes}"


def _summary_line(report: AuditReport) -> str:
    c = report.counts()
    return f"findings: {c['error']} error, {c['warning']} warning, {c['info']} info"


def _tabular(report: AuditReport) -> list[tuple[str, list[str], list[list[str]]]]:
    """The report's sections as (title, columns, rows) of plain strings, shared by text and Markdown."""
    return [
        (
            "Tables",
            ["table", "owner", "RLS", "forced", "policies", "workspace_id"],
            [
                [
                    t.table_name,
                    t.owner,
                    _yn(t.rls_enabled),
                    _yn(t.rls_forced),
                    f"{t.policies} ({t.restrictive_policies} restrictive)",
                    _yn(t.has_workspace_id),
                ]
                for t in report.tables
            ],
        ),
        (
            "Policies",
            ["table", "policy", "command", "kind", "roles", "USING", "WITH CHECK"],
            [
                [
                    p.table_name,
                    p.policy_name,
                    p.command,
                    "permissive" if p.permissive else "restrictive",
                    _join(p.roles),
                    _one_line(p.using_expr),
                    _one_line(p.with_check_expr),
                ]
                for p in report.policies
            ],
        ),
        (
            "Privileges (the owner's own left out)",
            ["object", "column", "grantee", "privilege", "grantable", "grantor"],
            [
                [
                    p.object,
                    p.column_name or "",
                    p.grantee,
                    p.privilege,
                    _yn(p.grantable),
                    p.grantor,
                ]
                for p in report.privileges
                if not p.grantee_is_owner
            ],
        ),
        (
            "Functions",
            ["function", "owner", "definer", "search_path", "leakproof", "execute"],
            [
                [
                    f.function_name,
                    f.owner,
                    _yn(f.security_definer),
                    f.search_path or "(not pinned)",
                    _yn(f.leakproof),
                    _join(f.executable_by),
                ]
                for f in report.functions
            ],
        ),
        (
            "Views",
            ["view", "owner", "security_invoker", "security_barrier"],
            [
                [v.view_name, v.owner, _yn(v.security_invoker), _yn(v.security_barrier)]
                for v in report.views
            ],
        ),
        (
            "Unique keys",
            ["index", "kind", "columns", "leads with workspace_id", "writable by"],
            [
                [
                    k.index_name,
                    k.kind,
                    _join(k.key_columns),
                    _yn(k.leads_with_workspace_id) if k.table_has_workspace_id else "n/a",
                    _join(k.writable_by),
                ]
                for k in report.keys
            ],
        ),
        (
            "Roles",
            ["role", "login", "groups", "SUPERUSER", "BYPASSRLS", "can become owner", "owns"],
            [
                [
                    r.role_name,
                    _yn(r.can_login),
                    _join(r.app_groups),
                    ("direct" if r.superuser else r.superuser_via or "")
                    if r.reaches_superuser
                    else "no",
                    ("direct" if r.bypassrls else r.bypassrls_via or "")
                    if r.reaches_bypassrls
                    else "no",
                    (r.owner_via or "as superuser") if r.can_become_owner else "no",
                    str(r.owned_objects),
                ]
                for r in report.roles
            ],
        ),
        (
            "Access",
            [
                "principal",
                "workspace/project",
                "purpose",
                "read",
                "write",
                "ceiling",
                "max_age",
                "semantic",
                "expires",
                "live",
                "granted to",
            ],
            [
                [
                    a.principal,
                    f"{a.workspace_id}/{a.project_id}",
                    a.purpose,
                    _yn(a.can_read),
                    _yn(a.can_write),
                    a.ceiling,
                    "" if a.max_age is None else str(a.max_age),
                    a.semantic_policy,
                    "" if a.expires_at is None else iso_utc(a.expires_at),
                    _yn(a.live),
                    a.granted_to + (" (membership)" if a.through_membership else ""),
                ]
                for a in report.access
            ],
        ),
        (
            "Findings",
            ["severity", "code", "object", "evidence", "fix"],
            [[f.severity, f.code, f.object, f.evidence, f.fix] for f in report.findings],
        ),
    ]


_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _clip(text: str, width: int = 72) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render_text(report: AuditReport, console: Console) -> None:
    """Rich tables for the inventory, then the findings with evidence and fix.

    Policy expressions are clipped here (Markdown and JSON carry them whole). Names and texts
    read from the catalog are printed as plain text, never interpreted as markup.
    """
    console.print(Text(_server_line(report)))
    sections = _tabular(report)
    for title, columns, rows in sections[:-1]:
        table = Table(title=title, title_justify="left", expand=False)
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            if title == "Policies":
                row = [*row[:5], _clip(row[5]), _clip(row[6])]
            table.add_row(*(Text(cell) for cell in row))
        if not rows:
            table.add_row(*([Text("(none)")] + [Text("")] * (len(columns) - 1)))
        console.print(table)
    console.print(Text("Findings", style="italic"))
    if not report.findings:
        console.print(Text("  (none)"))
    for f in report.findings:
        head = Text("  ")
        head.append(f.severity.upper(), style=_STYLE[f.severity])
        head.append(f"  {f.code}  {f.object_type} {f.object}")
        console.print(head)
        console.print(Text(f"      evidence: {f.evidence}"))
        console.print(Text(f"      fix: {f.fix}"))
    console.print(Text(_summary_line(report)))


def text_report(report: AuditReport, width: int = 160) -> str:
    """The text rendering as a string, without colour."""
    buffer = io.StringIO()
    render_text(report, Console(file=buffer, width=width, color_system=None, force_terminal=False))
    return buffer.getvalue()


def _md_cell(value: str) -> str:
    return _one_line(value).replace("\\", "\\\\").replace("|", "\\|") or " "


def _md_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = [
        "| " + " | ".join(_md_cell(c) for c in columns) + " |",
        "|" + "|".join("---" for _ in columns) + "|",
    ]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return lines


def render_markdown(report: AuditReport) -> str:
    """A Markdown document: the server check, the findings first, then the inventory."""
    sections = _tabular(report)
    findings = sections[-1]
    lines = [
        "# pyretrieve audit",
        "",
        _server_line(report),
        "",
        _summary_line(report),
        "",
    ]
    for title, columns, rows in [findings, *sections[:-1]]:
        lines += [f"## {title}", ""]
        lines += _md_table(columns, rows) if rows else ["(none)"]
        lines.append("")
    return "\n".join(lines)


def render_json(report: AuditReport) -> str:
    """Canonical JSON (sorted keys, no spaces); lists keep the report's stable order."""
    return canonical_json(report.to_plain())


# ------------------------------------------------------------------ HTML

# Ceilings in sensitivity order, each with the background of a matrix cell whose highest live
# grant has that ceiling.
_CEILING_COLOURS: tuple[tuple[str, str], ...] = (
    ("public", "#d8f0d8"),
    ("internal", "#d6e6fa"),
    ("confidential", "#fbe3bd"),
    ("restricted", "#f6c7c7"),
)
_CEILING_LEVEL = {name: level for level, (name, _) in enumerate(_CEILING_COLOURS)}

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d1d1f; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #b8b8b8; padding: 0.3em 0.5em; vertical-align: top; text-align: left; }
th { background: #f0f0f0; }
td.matrix { min-width: 9em; }
td.none { color: #888; text-align: center; }
td.expired { background: #ececec; color: #666; }
ul.grants { margin: 0; padding-left: 1.1em; }
li.expired { text-decoration: line-through; color: #777; }
.legend span { display: inline-block; padding: 0.1em 0.6em; margin-right: 0.4em; border: 1px solid #b8b8b8; }
tr.error td.severity { background: #f6c7c7; font-weight: bold; }
tr.warning td.severity { background: #fbe3bd; }
tr.info td.severity { background: #d6e6fa; }
code, td.code { font-family: ui-monospace, monospace; font-size: 0.92em; }
details { margin: 0.4em 0; } summary { cursor: pointer; font-weight: bold; }
""" + "".join(
    f"td.ceiling-{name}, .legend span.ceiling-{name} {{ background: {colour}; }}\n"
    for name, colour in _CEILING_COLOURS
)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def access_matrix(
    report: AuditReport,
) -> tuple[list[str], list[str], dict[tuple[str, str], list[AccessEntry]]]:
    """Principals (rows), scopes ``workspace/project`` (columns) and each cell's grants."""
    cells: dict[tuple[str, str], list[AccessEntry]] = {}
    for entry in report.access:
        scope = f"{entry.workspace_id}/{entry.project_id}"
        cells.setdefault((entry.principal, scope), []).append(entry)
    principals = sorted({p for p, _ in cells})
    scopes = sorted({s for _, s in cells})
    return principals, scopes, cells


def cell_ceiling(entries: Sequence[AccessEntry]) -> str | None:
    """The highest ceiling among a cell's live grants, or None when none is live."""
    live = [e.ceiling for e in entries if e.live]
    return max(live, key=lambda c: _CEILING_LEVEL.get(c, -1)) if live else None


def _grant_item(entry: AccessEntry) -> str:
    modes = "/".join(m for m, ok in (("read", entry.can_read), ("write", entry.can_write)) if ok)
    parts = [f"{entry.purpose}: {entry.ceiling}", modes or "no access"]
    if entry.max_age is not None:
        age = entry.max_age
        whole_days = age.seconds == 0 and age.microseconds == 0
        parts.append(f"max age {age.days} days" if whole_days else f"max age {age}")
    if entry.semantic_policy != "optional":
        parts.append(f"semantic {entry.semantic_policy}")
    if entry.through_membership:
        parts.append(f"via {entry.granted_to}")
    if entry.expires_at is not None:
        parts.append(("expired " if not entry.live else "expires ") + iso_utc(entry.expires_at))
    elif not entry.live:
        parts.append("not live")
    css = "" if entry.live else ' class="expired"'
    return f"<li{css}>{_e(', '.join(parts))}</li>"


def _html_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    out = ["<table>", "<thead><tr>"]
    out += [f"<th>{_e(c)}</th>" for c in columns]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in row) + "</tr>")
    if not rows:
        out.append(f'<tr><td colspan="{len(columns)}">(none)</td></tr>')
    out.append("</tbody></table>")
    return out


def render_html(report: AuditReport) -> str:
    """One self-contained HTML page: inline CSS, no script, nothing loaded from elsewhere.

    The access matrix has a row per principal and a column per scope; each cell lists the
    grants that apply (purpose, ceiling, read/write, limits) and is coloured by the highest
    ceiling among its live grants. The findings follow with their evidence and fix, then the
    inventory. Every name and text from the catalog is escaped, so none can add markup.
    A Content-Security-Policy of ``default-src 'none'`` keeps the page from loading anything.
    """
    principals, scopes, cells = access_matrix(report)
    c = report.counts()
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta http-equiv="Content-Security-Policy"'
        " content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>pyretrieve audit</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        "<h1>pyretrieve audit</h1>",
        f'<p id="server">{_e(_server_line(report))}</p>',
        f'<p id="summary" data-error="{c["error"]}" data-warning="{c["warning"]}"'
        f' data-info="{c["info"]}">{_e(_summary_line(report))}</p>',
        '<h2 id="access">Access matrix</h2>',
        "<p>Each cell lists the grants that apply to the principal in that scope"
        " (purpose: ceiling, read/write); its colour is the highest ceiling among the live"
        " grants. Struck-out grants are no longer live.</p>",
        '<p class="legend">'
        + "".join(f'<span class="ceiling-{n}">{n}</span>' for n, _ in _CEILING_COLOURS)
        + "</p>",
        '<table id="access-matrix">',
        "<thead><tr><th>principal</th>"
        + "".join(f'<th scope="col" data-scope="{_e(s)}">{_e(s)}</th>' for s in scopes)
        + "</tr></thead>",
        "<tbody>",
    ]
    for principal in principals:
        row = [f'<tr data-principal="{_e(principal)}"><th scope="row">{_e(principal)}</th>']
        for scope in scopes:
            entries = cells.get((principal, scope), [])
            attrs = f'data-principal="{_e(principal)}" data-scope="{_e(scope)}"'
            if not entries:
                row.append(f'<td class="matrix none" {attrs} data-ceiling="">&#8212;</td>')
                continue
            ceiling = cell_ceiling(entries)
            css = "expired" if ceiling is None else f"ceiling-{ceiling}"
            items = "".join(_grant_item(e) for e in entries)
            row.append(
                f'<td class="matrix {_e(css)}" {attrs} data-ceiling="{_e(ceiling or "")}">'
                f'<ul class="grants">{items}</ul></td>'
            )
        row.append("</tr>")
        out.append("".join(row))
    if not principals:
        out.append('<tr><td colspan="1">(no grants)</td></tr>')
    out += ["</tbody>", "</table>", '<h2 id="findings">Findings</h2>']
    out.append(
        '<table id="findings-table"><thead><tr><th>severity</th><th>code</th><th>object</th>'
        "<th>evidence</th><th>fix</th></tr></thead><tbody>"
    )
    for f in report.findings:
        out.append(
            f'<tr class="{_e(f.severity)}" data-code="{_e(f.code)}">'
            f'<td class="severity">{_e(f.severity)}</td><td class="code">{_e(f.code)}</td>'
            f"<td>{_e(f.object_type)} {_e(f.object)}</td><td>{_e(f.evidence)}</td>"
            f'<td class="fix">{_e(f.fix)}</td></tr>'
        )
    if not report.findings:
        out.append('<tr><td colspan="5">(none)</td></tr>')
    out += ["</tbody></table>", '<h2 id="inventory">Inventory</h2>']
    for title, columns, rows in _tabular(report)[:-1]:
        if title == "Access":
            continue
        out.append(f"<details><summary>{_e(title)} ({len(rows)})</summary>")
        out += _html_table(columns, rows)
        out.append("</details>")
    out += ["</body>", "</html>", ""]
    return "\n".join(out)
