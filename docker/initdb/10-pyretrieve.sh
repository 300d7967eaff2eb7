#!/usr/bin/env bash
# The install script relies on SET LOCAL, so it must run as one transaction.
set -euo pipefail
psql -v ON_ERROR_STOP=1 --single-transaction \
     --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
     -f /opt/pyretrieve/pyretrieve.sql
