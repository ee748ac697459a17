"""A throwaway PostgreSQL cluster on loopback for the store tests (initdb + pg_ctl, torn down after)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def find_pg_bin() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl`` (PATH, then /usr/lib/postgresql/*/bin)."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(candidate, "initdb").exists() and Path(candidate, "pg_ctl").exists():
            return Path(candidate)
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres(args: list[str]) -> list[str]:
    """Run as the ``postgres`` user when we are root (initdb refuses to run as root)."""
    if os.geteuid() != 0:
        return args
    if shutil.which("runuser"):
        return ["runuser", "-u", "postgres", "--", *args]
    import shlex

    return ["su", "postgres", "-s", "/bin/sh", "-c", shlex.join(args)]


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a temporary cluster on 127.0.0.1:<free port>; yield its DSN; stop and delete it."""
    bindir = find_pg_bin()
    if bindir is None:
        raise FileNotFoundError("PostgreSQL server binaries (initdb, pg_ctl) not found")
    root = Path(tempfile.mkdtemp(prefix="kt-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
        shutil.chown(sock, "postgres", "postgres")
        os.chmod(root, 0o700)
    port = free_port()
    log = root / "server.log"
    try:
        subprocess.run(_as_postgres([str(bindir / "initdb"), "-D", str(data), "-U", "kt", "-A", "trust",
                                     "-E", "UTF8", "--locale=C"]),
                       check=True, capture_output=True, timeout=120)
        subprocess.run(_as_postgres([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60",
                                     "-o", f"-c listen_addresses=127.0.0.1 -p {port} -k {sock} -c fsync=off",
                                     "start"]),
                       check=True, capture_output=True, timeout=120)
        yield f"postgresql://kt@127.0.0.1:{port}/postgres"
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(_as_postgres([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
                           capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)
