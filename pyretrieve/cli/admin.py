"""Admin commands: workspaces, models, grants and who holds them."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pyretrieve import contract
from pyretrieve.cli import main
from pyretrieve.cli.common import as_option, connect, dsn_option, handle_errors, transaction
from pyretrieve.embedders.registry import available_models, get_embedder, register_model

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
@as_option
@dsn_option
@click.pass_context
@handle_errors
def workspaces_create(
    ctx: click.Context,
    workspace: str,
    projects: tuple[str, ...],
    ts_config: str,
    principal: str | None,
    dsn: str | None,
) -> None:
    """Create a workspace (and projects) idempotently."""
    with (
        connect(dsn or ctx.obj["dsn"]) as conn,
        transaction(conn, principal or ctx.obj["principal"]),
    ):
        conn.execute("SELECT pyretrieve.create_workspace(p_workspace => %s)", (workspace,))
        for project in projects:
            conn.execute(
                "SELECT pyretrieve.create_project(p_workspace => %s, p_project => %s,"
                " p_ts_config => %s::regconfig)",
                (workspace, project, ts_config),
            )
    click.echo(f"workspace {workspace}" + "".join(f", project {p}" for p in projects))


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
            "SELECT model_id AS model, dimension, registered_at FROM pyretrieve.list_models()"
            " ORDER BY model_id"
        ).fetchall()
    _table(["model", "dimension", "registered_at"], list(rows))
    click.echo(f"embedders available here: {', '.join(available_models())}")


@models.command("register")
@click.argument("model")
@as_option
@dsn_option
@click.pass_context
@handle_errors
def models_register(ctx: click.Context, model: str, principal: str | None, dsn: str | None) -> None:
    """Register the model of a locally available embedder (its id and dimension)."""
    embedder = get_embedder(model)
    with connect(dsn or ctx.obj["dsn"]) as conn:
        register_model(conn, embedder, principal=principal or ctx.obj["principal"])
    click.echo(f"model {embedder.model_id} ({embedder.dimension}-d) registered")


@main.command()
@click.argument("grantee")
@click.option("--workspace", required=True)
@click.option("--project", required=True)
@click.option("--purpose", required=True)
@click.option("--ceiling", type=CLASSIFICATIONS, required=True)
@click.option("--max-age", default=None, help="Freshness window, e.g. '30 days' or '12 hours'.")
@click.option(
    "--semantic", type=click.Choice(["disabled", "optional", "required"]), default="optional"
)
@click.option("--expires-at", default=None, help="Timestamp after which the grant is void.")
@as_option
@dsn_option
@handle_errors
def grant(
    grantee: str,
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
    """Grant GRANTEE (a role) read access to a workspace/project for a purpose."""
    with connect(dsn) as conn, transaction(conn, principal):
        row = conn.execute(
            "SELECT pyretrieve.grant_access(p_principal => %s::regrole, p_workspace => %s,"
            " p_project => %s, p_purpose => %s, p_ceiling => %s::pyretrieve.classification,"
            " p_max_age => %s::interval, p_semantic_policy => %s::pyretrieve.semantic_policy,"
            " p_expires_at => %s::timestamptz) AS grant_id",
            (grantee, workspace, project, purpose, ceiling, max_age, semantic, expires_at),
        ).fetchone()
    assert row is not None
    click.echo(f"granted {grantee} {workspace}/{project} for {purpose} (grant {row['grant_id']})")


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


@principals.command("create")
@click.argument("name")
@click.option(
    "--reader", "kind", flag_value="reader", default=True, help="May search (the default)."
)
@click.option("--writer", "kind", flag_value="writer", help="May ingest, and search.")
@click.option(
    "--admin", "kind", flag_value="admin", help="Manages workspaces, projects, grants and models."
)
@dsn_option
@handle_errors
def principals_create(name: str, kind: str, dsn: str | None) -> None:
    """Create principal NAME: a NOLOGIN role in the reader, writer or admin group, which the
    embedded server's login role may SET ROLE to. Runs as the installer (role management).

    A principal still needs a grant before it sees or writes anything: `pyretrieve grant NAME
    --workspace W --project P --purpose X --ceiling C --as ADMIN`."""
    from psycopg import sql

    from pyretrieve.embedded import APP_ROLE, ensure_app_role
    from pyretrieve.errors import InvalidInput

    if not name or len(name) > 63 or name.startswith(("pg_", "pyretrieve_")):
        raise InvalidInput(
            "a principal name is 1 to 63 characters and starts neither with pg_ nor pyretrieve_"
        )
    with connect(dsn, installer=True) as conn:
        role = sql.Identifier(name)
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
            conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(role))
        conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(GROUPS[kind]), role))
        if dsn is None:
            ensure_app_role(conn)
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_ROLE,)).fetchone():
            conn.execute(sql.SQL("GRANT {} TO {}").format(role, sql.Identifier(APP_ROLE)))
    click.echo(f"principal {name} ({GROUPS[kind]})")
