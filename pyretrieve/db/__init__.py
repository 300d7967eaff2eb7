"""Database layer: connections, installation, migrations and the SQLSTATE error map."""
