"""A private PostgreSQL cluster for the tests: a real server, never a mock.

`PgCluster.start()` runs Debian's `initdb` and `pg_ctl` (package postgresql-15) on a fresh
directory under the system temp dir, listening only on a Unix socket in that directory
(`listen_addresses=''`), with `trust` authentication for local connections. `initdb` refuses
to run as root, so as root the binaries run as the package's `postgres` user (`runuser`)
on a directory that user owns. `stop()` shuts the server down (`pg_ctl stop -m fast`) and
removes the directory.

Missing PostgreSQL is a failure with the line that installs it, never a skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

INSTALL_HINT = ("PostgreSQL 15 is needed for the shared-store tests: "
                "apt-get install -y postgresql-15 (Debian package; provides /usr/lib/postgresql/15/bin)")
BIN_DIRS = [Path(p) for p in os.environ.get("PG_BIN", "").split(":") if p] + [
    Path("/usr/lib/postgresql/15/bin"), Path("/usr/lib/postgresql/16/bin"),
    Path("/usr/lib/postgresql/17/bin")]


def pg_bin() -> Path:
    for directory in BIN_DIRS:
        if (directory / "initdb").exists() and (directory / "pg_ctl").exists():
            return directory
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    raise RuntimeError(INSTALL_HINT)


class PgCluster:
    """One running cluster; `url(db, user)` builds a connection URL to its Unix socket."""

    def __init__(self) -> None:
        self.bin = pg_bin()
        self.root = Path(tempfile.mkdtemp(prefix="orch-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root
        self.superuser = "postgres"
        self._as_root = os.geteuid() == 0

    def _run(self, *argv: str) -> subprocess.CompletedProcess:
        cmd = [str(a) for a in argv]
        if self._as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)

    def start(self) -> PgCluster:
        if self._as_root:
            shutil.chown(self.root, "postgres", "postgres")
        os.chmod(self.root, 0o755)
        done = self._run(self.bin / "initdb", "-D", self.data, "-U", self.superuser, "-A", "trust",
                         "--no-sync", "-E", "UTF8", "--locale=C")
        if done.returncode:
            raise RuntimeError(f"initdb failed: {done.stderr.strip()}")
        options = (f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}' "
                   "-c fsync=off -c synchronous_commit=off -c max_connections=60 "
                   "-c shared_buffers=16MB")
        done = self._run(self.bin / "pg_ctl", "-D", self.data, "-l", self.root / "server.log",
                         "-o", options, "-w", "-t", "60", "start")
        if done.returncode:
            log = (self.root / "server.log").read_text() if (self.root / "server.log").exists() else ""
            raise RuntimeError(f"pg_ctl start failed: {done.stderr.strip()} {log[-500:]}")
        return self

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run(self.bin / "pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, dbname: str = "postgres", user: str | None = None) -> str:
        return f"postgresql://{user or self.superuser}@/{dbname}?host={self.socket_dir}"

    def sql(self, statement: str, dbname: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.url(dbname), autocommit=True) as conn:
            conn.execute(statement)

    def new_database(self, owner: str = "operator") -> str:
        """A fresh empty database owned by the (non-superuser) role `owner`; returns its URL
        for that role, the way a lab's operator would connect."""
        import psycopg

        name = "c_" + uuid.uuid4().hex[:10]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname=%s", (owner,)).fetchone()
            if not exists:
                conn.execute(f'CREATE ROLE "{owner}" LOGIN CREATEROLE')
            conn.execute(f'CREATE DATABASE {name} OWNER "{owner}"')
        return self.url(name, owner)
