"""Admin commands: workspaces, models, grants and who holds them."""

from __future__ import annotations

import shlex
from typing import Any

import click
import psycopg
from psycopg.rows import tuple_row
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pyretrieve import contract
from pyretrieve.cli import main
from pyretrieve.cli.common import as_option, connect, dsn_option, handle_errors, transaction
from pyretrieve.db import queries
from pyretrieve.embedders import registry
from pyretrieve.embedders.registry import available_models, get_embedder, register_model
from pyretrieve.errors import InvalidInput, UnknownPrincipal
from pyretrieve.types import Weights

CLASSIFICATIONS = click.Choice(list(contract.CLASSIFICATION_ORDER))


def _table(columns: list[str], rows: list[dict[str, object]]) -> None:
    table = Table()
    for c in columns:
        # Names and ids must stay readable in a narrow terminal: wrap, never cut.
        table.add_column(c, overflow="fold")
    for row in rows:
        table.add_row(*(Text("" if row[c] is None else str(row[c])) for c in columns))
    Console().print(table)


@main.group(invoke_without_command=True)
@as_option
@dsn_option
@click.pass_context
@handle_errors
def workspaces(ctx: click.Context, principal: str | None, dsn: str | None) -> None:
    """List workspaces and their projects (admins), or create them."""
    ctx.ensure_object(dict)
    ctx.obj.update(principal=principal, dsn=dsn)
    if ctx.invoked_subcommand is not None:
        return
    with connect(dsn) as conn, transaction(conn, principal):
        rows = conn.execute(queries.LIST_PROJECTS).fetchall()
    _table(["workspace", "project", "ts_config"], list(rows))


@workspaces.command("create")
@click.argument("workspace")
@click.option("--project", "projects", multiple=True, help="Also create this project (repeatable).")
@click.option("--ts-config", default="pg_catalog.english", show_default=True)
@click.option(
    "--model",
    "models_",
    multiple=True,
    help="Also register this embedding model (repeatable): ingest and search embed with it,"
    f" by default {registry.DEFAULT_MODEL} ({registry.TEST_MODEL} is for tests and demos only)."
    " Models are shared by all workspaces; `pyretrieve models` lists them.",
)
@as_option
@dsn_option
@click.pass_context
@handle_errors
def workspaces_create(
    ctx: click.Context,
    workspace: str,
    projects: tuple[str, ...],
    ts_config: str,
    models_: tuple[str, ...],
    principal: str | None,
    dsn: str | None,
) -> None:
    """Create a workspace (and projects) idempotently. Admins only (--as ADMIN)."""
    check_names(workspace=workspace)
    for project in projects:
        check_names(project=project)
    embedders = [get_embedder(m) for m in models_]
    with (
        connect(dsn or ctx.obj["dsn"]) as conn,
        transaction(conn, principal or ctx.obj["principal"]),
    ):
        for embedder in embedders:
            conn.execute(queries.REGISTER_MODEL, registry.register_params(embedder))
        conn.execute(queries.CREATE_WORKSPACE, (workspace,))
        for project in projects:
            conn.execute(queries.CREATE_PROJECT_WITH_CONFIG, (workspace, project, ts_config))
    click.echo(
        f"workspace {workspace}"
        + "".join(f", project {p}" for p in projects)
        + "".join(f", model {e.model_id} ({e.dimension}-d)" for e in embedders)
    )


@main.group(invoke_without_command=True)
@as_option
@dsn_option
@click.pass_context
@handle_errors
def models(ctx: click.Context, principal: str | None, dsn: str | None) -> None:
    """List registered embedding models, or register one."""
    ctx.ensure_object(dict)
    ctx.obj.update(principal=principal, dsn=dsn)
    if ctx.invoked_subcommand is not None:
        return
    with connect(dsn) as conn, transaction(conn, principal):
        rows = conn.execute(queries.LIST_MODELS).fetchall()
    columns = ["model", "dimension", "fusion", "lexical_weight", "vector_weight", "registered_at"]
    _table(columns, list(rows))
    click.echo(f"embedders available here: {', '.join(available_models())}")


@models.command("register")
@click.argument("model")
@click.option(
    "--lexical-weight",
    type=float,
    help="Default weight of the lexical leg for searches with this model (with --vector-weight;"
    " default: the weights shipped for a known model, else 1.0 each).",
)
@click.option(
    "--vector-weight", type=float, help="Default weight of the vector leg (with --lexical-weight)."
)
@click.option(
    "--fusion",
    type=click.Choice(list(contract.FUSIONS)),
    help="Default fusion for searches with this model (default: the one shipped for a known"
    " model, else rrf).",
)
@as_option
@dsn_option
@click.pass_context
@handle_errors
def models_register(
    ctx: click.Context,
    model: str,
    lexical_weight: float | None,
    vector_weight: float | None,
    fusion: str | None,
    principal: str | None,
    dsn: str | None,
) -> None:
    """Register the model of a locally available embedder: its id, its dimension and the
    default fusion and weights searches with it use when they give none."""
    if (lexical_weight is None) != (vector_weight is None):
        raise InvalidInput("give --lexical-weight and --vector-weight together, or neither")
    weights = None
    if lexical_weight is not None and vector_weight is not None:
        weights = Weights(lexical=lexical_weight, vector=vector_weight)
    embedder = get_embedder(model)
    with connect(dsn or ctx.obj["dsn"]) as conn:
        register_model(
            conn,
            embedder,
            principal=principal or ctx.obj["principal"],
            weights=weights,
            fusion=fusion,
        )
    chosen = weights or registry.default_weights(embedder.model_id)
    method = fusion or registry.default_fusion(embedder.model_id)
    shown = "" if chosen is None else f", default weights {chosen.lexical:g}/{chosen.vector:g}"
    shown += "" if method is None else f", default fusion {method}"
    click.echo(f"model {embedder.model_id} ({embedder.dimension}-d) registered{shown}")


@models.command("index")
@click.argument("model")
@click.option("--workspace", "-w", required=True)
@click.option("--project", "-p", required=True)
@click.option("--drop", is_flag=True, help="Drop the scope's index: its vector leg is exact again.")
@as_option
@dsn_option
@click.pass_context
@handle_errors
def models_index(
    ctx: click.Context,
    model: str,
    workspace: str,
    project: str,
    drop: bool,
    principal: str | None,
    dsn: str | None,
) -> None:
    """Give one workspace/project its own HNSW index of MODEL; its vector leg then searches
    through it instead of exactly (worth it above about 20,000 rows of the scope, see
    docs/architecture.md; maintain-indexes does this for every scope). Building it blocks
    writes to the embeddings while it runs."""
    check_names(workspace=workspace, project=project)
    with (
        connect(dsn or ctx.obj["dsn"]) as conn,
        transaction(conn, principal or ctx.obj["principal"]),
    ):
        params = (workspace, project, model)
        if drop:
            row = conn.execute(queries.DROP_VECTOR_INDEX, params).fetchone()
        else:
            row = conn.execute(queries.CREATE_VECTOR_INDEX, params).fetchone()
    if drop:
        done = "dropped" if row and row["dropped"] else "had none"
        click.echo(f"{workspace}/{project}: approximate index of {model} {done}")
    else:
        click.echo(f"{workspace}/{project}: approximate index of {model} ({row and row['name']})")


@models.command("maintain-indexes")
@click.option(
    "--min-rows",
    type=click.IntRange(min=2),
    default=contract.VECTOR_INDEX_MIN_ROWS,
    show_default=True,
    help="A scope gets its own index from this many embeddings of a model, and loses it below"
    " half as many.",
)
@click.option("--dry-run", is_flag=True, help="Say what would be done; build and drop nothing.")
@as_option
@dsn_option
@click.pass_context
@handle_errors
def models_maintain_indexes(
    ctx: click.Context, min_rows: int, dry_run: bool, principal: str | None, dsn: str | None
) -> None:
    """Give every scope holding at least --min-rows embeddings of a model its own HNSW index of
    it, and take the index from scopes below half as many. Run it as a maintenance job;
    building an index blocks writes to the embeddings while it runs."""
    with (
        connect(dsn or ctx.obj["dsn"]) as conn,
        transaction(conn, principal or ctx.obj["principal"]),
    ):
        rows = conn.execute(queries.MAINTAIN_VECTOR_INDEXES, (min_rows, dry_run)).fetchall()
    _table(
        ["workspace_id", "project_id", "model_id", "embeddings", "action", "applied"],
        [dict(r) for r in rows],
    )


def check_names(**names: str) -> None:
    """Workspace, project and purpose names break the identifier rule: say which, and the rule."""
    for what, value in names.items():
        if not contract.is_identifier(value):
            raise InvalidInput(contract.identifier_error(what))


def check_values(conn: psycopg.Connection[Any], options: dict[str, tuple[str | None, str]]) -> None:
    """Each given option's value must read as its SQL type (e.g. an interval): a value that
    does not is named with the option, before anything is written."""
    examples = {"interval": "'30 days' or '12 hours'", "timestamptz": "'2027-01-31 18:00+00'"}
    for option, (value, type_) in options.items():
        if value is None:
            continue
        try:
            conn.execute(queries.cast_value(type_), (value,))
        except psycopg.errors.DataError:
            raise InvalidInput(
                f"{option} {value!r} does not read as {'an' if type_[0] in 'aeiou' else 'a'}"
                f" {type_}: write e.g. {examples[type_]}"
            ) from None


def check_grantees(
    conn: psycopg.Connection[Any], grantees: tuple[str, ...], *, revoking: bool = False
) -> None:
    """A grantee that is no role is named (role names are public in pg_roles)."""
    for grantee in grantees:
        if conn.execute(queries.ROLE_EXISTS, (grantee,)).fetchone():
            continue
        if revoking:
            raise UnknownPrincipal(f"no role {grantee!r} to revoke a grant from")
        raise UnknownPrincipal(
            f"no role {grantee!r} to grant to: create it first with `pyretrieve principals"
            f" create {shlex.quote(grantee)} --reader` (or --writer, --admin); nothing granted"
        )


PURPOSE_HELP = (
    "Why the grantee reads, a name such as support or research. A search states its purpose"
    " (search --purpose) and is answered under the grant for exactly that purpose, or denied:"
    " one principal may hold different ceilings for different purposes. A writer writes"
    " wherever it holds any live grant, up to its ceiling, so for a writer that only ingests"
    " the purpose is a label (e.g. ingest)."
)


@main.command()
@click.argument("grantees", nargs=-1, required=True, metavar="GRANTEE...")
@click.option("--workspace", required=True)
@click.option("--project", required=True)
@click.option("--purpose", required=True, help=PURPOSE_HELP)
@click.option(
    "--ceiling",
    type=CLASSIFICATIONS,
    required=True,
    help="The highest classification the grantee sees (readers) or writes (writers).",
)
@click.option("--max-age", default=None, help="Freshness window, e.g. '30 days' or '12 hours'.")
@click.option(
    "--semantic", type=click.Choice(["disabled", "optional", "required"]), default="optional"
)
@click.option("--expires-at", default=None, help="Timestamp after which the grant is void.")
@as_option
@dsn_option
@handle_errors
def grant(
    grantees: tuple[str, ...],
    workspace: str,
    project: str,
    purpose: str,
    ceiling: str,
    max_age: str | None,
    semantic: str,
    expires_at: str | None,
    principal: str | None,
    dsn: str | None,
) -> None:
    """Grant each GRANTEE (a principal role) access to a workspace/project for a purpose.

    Readers search under the grant for the purpose they name; writers write (and may search)
    wherever they hold a grant, up to its ceiling. Replaces an existing grant for the same
    principal, scope and purpose. All grantees or none. Admins only (--as ADMIN)."""
    check_names(workspace=workspace, project=project, purpose=purpose)
    with connect(dsn) as conn:
        check_values(
            conn, {"--max-age": (max_age, "interval"), "--expires-at": (expires_at, "timestamptz")}
        )
        check_grantees(conn, grantees)
        _grant(
            conn,
            grantees,
            workspace,
            project,
            purpose,
            ceiling,
            max_age,
            semantic,
            expires_at,
            principal,
        )


def _grant(
    conn: psycopg.Connection[Any],
    grantees: tuple[str, ...],
    workspace: str,
    project: str,
    purpose: str,
    ceiling: str,
    max_age: str | None,
    semantic: str,
    expires_at: str | None,
    principal: str | None,
) -> None:
    with transaction(conn, principal):
        granted = []
        for grantee in grantees:
            row = conn.execute(
                queries.GRANT_ACCESS,
                (grantee, workspace, project, purpose, ceiling, max_age, semantic, expires_at),
            ).fetchone()
            assert row is not None
            granted.append((grantee, row["grant_id"]))
    for grantee, grant_id in granted:
        click.echo(
            f"granted {grantee} {workspace}/{project} for {purpose} up to {ceiling}"
            f" (grant {grant_id})"
        )


@main.command()
@click.argument("grantee")
@click.option("--workspace", required=True)
@click.option("--project", required=True)
@click.option("--purpose", required=True)
@as_option
@dsn_option
@handle_errors
def revoke(
    grantee: str, workspace: str, project: str, purpose: str, principal: str | None, dsn: str | None
) -> None:
    """Revoke GRANTEE's grant for a workspace/project and purpose."""
    check_names(workspace=workspace, project=project, purpose=purpose)
    with connect(dsn) as conn:
        check_grantees(conn, (grantee,), revoking=True)
        _revoke(conn, grantee, workspace, project, purpose, principal)


def _revoke(
    conn: psycopg.Connection[Any],
    grantee: str,
    workspace: str,
    project: str,
    purpose: str,
    principal: str | None,
) -> None:
    with transaction(conn, principal):
        row = conn.execute(
            queries.REVOKE_ACCESS,
            (grantee, workspace, project, purpose),
        ).fetchone()
    assert row is not None
    click.echo("revoked" if row["found"] else "no such grant")


@main.group(invoke_without_command=True)
@as_option
@dsn_option
@click.pass_context
@handle_errors
def principals(ctx: click.Context, principal: str | None, dsn: str | None) -> None:
    """Every grant with its principal, group membership, ceiling and window (admins); or
    create a principal."""
    if ctx.invoked_subcommand is not None:
        return
    with connect(dsn) as conn, transaction(conn, principal):
        rows = conn.execute(queries.LIST_GRANTS).fetchall()
    _table(
        [
            "principal",
            "groups",
            "workspace",
            "project",
            "purpose",
            "ceiling",
            "max_age",
            "semantic",
            "expires_at",
        ],
        list(rows),
    )


GROUPS = {"reader": "pyretrieve_reader", "writer": "pyretrieve_writer", "admin": "pyretrieve_admin"}


def parse_principals(words: tuple[str, ...]) -> list[tuple[str, str]]:
    """``ops --admin me --writer you them`` → [(ops, admin), (me, writer), (you, reader),
    (them, reader)]: a kind flag applies to the names before it back to the previous flag;
    names after the last flag (or with none) are readers."""
    out: list[tuple[str, str]] = []
    pending: list[str] = []
    for word in words:
        if word.startswith("--") and word[2:] in GROUPS:
            if not pending:
                raise InvalidInput(f"{word} follows the name(s) it applies to: NAME... {word}")
            out.extend((name, word[2:]) for name in pending)
            pending = []
        elif word.startswith("-"):
            raise InvalidInput(f"unknown option {word} (the kinds are --reader, --writer, --admin)")
        else:
            pending.append(word)
    out.extend((name, "reader") for name in pending)
    if not out:
        raise InvalidInput("name at least one principal: NAME... --reader|--writer|--admin")
    same_kind(out)
    return out


def same_kind(wanted: list[tuple[str, str]]) -> None:
    """A name given twice must be given with one kind."""
    seen: dict[str, str] = {}
    for name, kind in wanted:
        if seen.setdefault(name, kind) != kind:
            raise InvalidInput(f"principal {name} is named twice with different kinds")


# What an existing role may hold to be adopted as a principal: the login role will be able to
# SET ROLE to it, so a role with any attribute or membership beyond the three groups would
# hand the login role that power (SET ROLE to a superuser makes a superuser).
_ATTRIBUTES = ("SUPERUSER", "BYPASSRLS", "CREATEROLE", "CREATEDB", "REPLICATION", "LOGIN")


def check_principal_names(wanted: list[tuple[str, str]]) -> None:
    """Names the server could not hold, or that would shadow its own roles, fail first."""
    for name, _kind in wanted:
        if not name or len(name) > 63 or name.startswith(("pg_", "pyretrieve_")):
            raise InvalidInput(
                "a principal name is 1 to 63 characters and starts neither with pg_ nor pyretrieve_"
            )


def create_principals(
    conn: psycopg.Connection[Any], wanted: list[tuple[str, str]], *, embedded_default: bool
) -> list[str]:
    """Create (or adopt) each principal as a NOLOGIN member of its group, grant it to the
    embedded server's login role, all in one transaction; returns a line per principal.

    An existing role is adopted only if it is a plain principal already: NOLOGIN, no
    attribute, no membership but the three groups. Anything else is refused, because the
    login role could then SET ROLE to it and take its powers."""
    from pyretrieve.embedded import APP_ROLE, ensure_app_role

    check_principal_names(wanted)
    lines: list[str] = []
    with conn.transaction():
        if embedded_default:
            ensure_app_role(conn)
        app = conn.execute(queries.ROLE_EXISTS, (APP_ROLE,)).fetchone()
        for name, kind in wanted:
            with conn.cursor(row_factory=tuple_row) as cur:
                existing = cur.execute(queries.ROLE_POWERS, (name,)).fetchone()
            if existing is None:
                conn.execute(queries.create_nologin_role(name))
            else:
                held = [a for a, on in zip(_ATTRIBUTES, existing[:6], strict=True) if on]
                if existing[6]:
                    held.append("membership in other roles")
                if held:
                    raise InvalidInput(
                        f"role {name!r} exists and is no plain principal ({', '.join(held)}):"
                        " the login role could act as it with those powers; choose another"
                        " name, nothing was created"
                    )
            conn.execute(queries.grant_role(GROUPS[kind], name))
            if app:
                conn.execute(queries.grant_role(name, APP_ROLE))
            with conn.cursor(row_factory=tuple_row) as cur:
                others = cur.execute(queries.ROLE_OTHER_GROUPS, (name, GROUPS[kind])).fetchall()
            also = f"; also in {', '.join(str(g) for (g,) in others)}" if others else ""
            lines.append(f"principal {name} ({GROUPS[kind]}{also})")
    return lines


@principals.command(
    "create",
    context_settings={"ignore_unknown_options": True},
    options_metavar="[--dsn DSN]",
)
@click.argument("specs", nargs=-1, metavar="NAME... [--reader|--writer|--admin] ...")
@dsn_option
@handle_errors
def principals_create(specs: tuple[str, ...], dsn: str | None) -> None:
    """Create principals: NOLOGIN roles in the reader, writer or admin group, which the
    embedded server's login role may SET ROLE to. Runs as the installer (role management).
    Idempotent; all or nothing.

    Each kind flag applies to the names just before it; names without one are readers:

    \b
      pyretrieve principals create ops --admin      # manages workspaces, grants, models
      pyretrieve principals create ingest --writer  # may ingest (and search)
      pyretrieve principals create alice bob        # may search (--reader, the default)
      pyretrieve principals create ops --admin ingest --writer alice --reader

    `pyretrieve install --admin ops --writer ingest --reader alice` does the same while it
    installs. An existing role is taken over only if it is NOLOGIN with no attribute and no
    membership but these groups. A principal still needs a grant before it sees or writes
    anything: `pyretrieve grant NAME --workspace W --project P --purpose X --ceiling C --as
    ADMIN`."""
    wanted = parse_principals(specs)
    check_principal_names(wanted)
    with connect(dsn, installer=True) as conn:
        for line in create_principals(conn, wanted, embedded_default=dsn is None):
            click.echo(line)
