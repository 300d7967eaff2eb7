"""Admin commands: workspaces, models, grants and who holds them."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pyretrieve import contract
from pyretrieve.cli import main
from pyretrieve.cli.common import as_option, connect, dsn_option, handle_errors, transaction
from pyretrieve.embedders import registry
from pyretrieve.embedders.registry import available_models, get_embedder, register_model
from pyretrieve.errors import InvalidInput
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
        rows = conn.execute(
            "SELECT workspace_id AS workspace, project_id AS project, ts_config::text AS ts_config"
            "  FROM pyretrieve.list_projects() ORDER BY 1, 2"
        ).fetchall()
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
    embedders = [get_embedder(m) for m in models_]
    with (
        connect(dsn or ctx.obj["dsn"]) as conn,
        transaction(conn, principal or ctx.obj["principal"]),
    ):
        for embedder in embedders:
            conn.execute(registry.REGISTER_SQL, registry.register_params(embedder))
        conn.execute("SELECT pyretrieve.create_workspace(p_workspace => %s)", (workspace,))
        for project in projects:
            conn.execute(
                "SELECT pyretrieve.create_project(p_workspace => %s, p_project => %s,"
                " p_ts_config => %s::regconfig)",
                (workspace, project, ts_config),
            )
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
        rows = conn.execute(
            "SELECT model_id AS model, dimension, fusion, lexical_weight, vector_weight,"
            " registered_at FROM pyretrieve.list_models() ORDER BY model_id"
        ).fetchall()
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
    principal, scope and purpose. Admins only (--as ADMIN)."""
    with connect(dsn) as conn, transaction(conn, principal):
        granted = []
        for grantee in grantees:
            row = conn.execute(
                "SELECT pyretrieve.grant_access(p_principal => %s::regrole, p_workspace => %s,"
                " p_project => %s, p_purpose => %s,"
                " p_ceiling => %s::pyretrieve.classification, p_max_age => %s::interval,"
                " p_semantic_policy => %s::pyretrieve.semantic_policy,"
                " p_expires_at => %s::timestamptz) AS grant_id",
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
    with connect(dsn) as conn, transaction(conn, principal):
        row = conn.execute(
            "SELECT pyretrieve.revoke_access(p_principal => %s::regrole, p_workspace => %s,"
            " p_project => %s, p_purpose => %s) AS found",
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
        rows = conn.execute(
            "SELECT g.principal,"
            "       (SELECT string_agg(r.rolname, ',' ORDER BY r.rolname)"
            "          FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid"
            "         WHERE m.member = g.principal::regrole::oid"
            "           AND r.rolname LIKE 'pyretrieve\\_%%') AS groups,"
            "       g.workspace_id AS workspace, g.project_id AS project, g.purpose,"
            "       g.ceiling::text AS ceiling, g.max_age::text AS max_age,"
            "       g.semantic_policy::text AS semantic, g.expires_at"
            "  FROM pyretrieve.list_grants() g ORDER BY 1, 3, 4, 5"
        ).fetchall()
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
    from pyretrieve.errors import InvalidInput

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
    seen: dict[str, str] = {}
    for name, kind in out:
        if seen.setdefault(name, kind) != kind:
            raise InvalidInput(f"principal {name} is named twice with different kinds")
    return out


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
    Idempotent.

    Each kind flag applies to the names just before it; names without one are readers:

    \b
      pyretrieve principals create ops --admin      # manages workspaces, grants, models
      pyretrieve principals create ingest --writer  # may ingest (and search)
      pyretrieve principals create alice bob        # may search (--reader, the default)
      pyretrieve principals create ops --admin ingest --writer alice --reader

    A principal still needs a grant before it sees or writes anything: `pyretrieve grant NAME
    --workspace W --project P --purpose X --ceiling C --as ADMIN`."""
    from psycopg import sql

    from pyretrieve.embedded import APP_ROLE, ensure_app_role
    from pyretrieve.errors import InvalidInput

    wanted = parse_principals(specs)
    for name, _kind in wanted:
        if not name or len(name) > 63 or name.startswith(("pg_", "pyretrieve_")):
            raise InvalidInput(
                "a principal name is 1 to 63 characters and starts neither with pg_ nor pyretrieve_"
            )
    with connect(dsn, installer=True) as conn:
        if dsn is None:
            ensure_app_role(conn)
        app = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_ROLE,)).fetchone()
        for name, kind in wanted:
            role = sql.Identifier(name)
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
                conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(role))
            conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(GROUPS[kind]), role))
            if app:
                conn.execute(sql.SQL("GRANT {} TO {}").format(role, sql.Identifier(APP_ROLE)))
            click.echo(f"principal {name} ({GROUPS[kind]})")
