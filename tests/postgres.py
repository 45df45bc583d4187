"""The throwaway PostgreSQL server ``scripts/postgres`` starts for a test run: a fresh
database per test (so no test sees another's rows), and stopping and starting the server
(for the tests of an outage). Without that server the tests that need it skip."""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

URL_ENV = "FLEXMATCH_TEST_POSTGRES_URL"
BIN_ENV = "FLEXMATCH_TEST_POSTGRES_BIN"
DATA_ENV = "FLEXMATCH_TEST_POSTGRES_DATA"
SKIP_REASON = (
    f"no PostgreSQL server: {URL_ENV} is not set "
    "(run the tests under ./scripts/postgres, as ./scripts/test does)"
)


def _missing(reason: str) -> None:
    """Skip where a developer runs tests without a server; in CI (``CI`` set, where
    ./scripts/test always starts one) a missing server is a failure, never a silent skip."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def server_url() -> sa.URL:
    """The server's URL (its maintenance database), or skip the test."""
    url = os.environ.get(URL_ENV)
    if not url:
        _missing(SKIP_REASON)
    return sa.make_url(url)


def _admin(url: sa.URL) -> sa.Engine:
    return sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.NullPool)


@contextlib.contextmanager
def fresh_database() -> Iterator[str]:
    """A new, empty database on the server, dropped afterwards; its URL, password included."""
    url = server_url()
    name = f"flexmatch_test_{secrets.token_hex(6)}"
    admin = _admin(url)
    with admin.connect() as connection:
        connection.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        ensure_running()
        with admin.connect() as connection:  # FORCE: a killed replica may hold a connection
            connection.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _pg_ctl(*args: str) -> subprocess.CompletedProcess[str]:
    """``pg_ctl`` on the test server, as the user that owns its data folder."""
    bin_dir, data = os.environ.get(BIN_ENV), os.environ.get(DATA_ENV)
    if not bin_dir or not data:
        _missing(f"{BIN_ENV} and {DATA_ENV} are not set (run under ./scripts/postgres)")
    command = [str(Path(bin_dir) / "pg_ctl"), "-D", data, *args]
    if os.geteuid() == 0:  # PostgreSQL refuses root: the script made the postgres user own it
        owner = Path(data).owner()
        command = ["runuser", "-u", owner, "--", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=90)


def stop_server() -> None:
    """Stop the server now (fast: open connections are closed)."""
    done = _pg_ctl("-m", "fast", "-w", "-t", "60", "stop")
    assert done.returncode == 0, done.stderr


def ensure_running() -> None:
    """Start the server unless it runs (a test that stopped it may have failed midway)."""
    if _pg_ctl("status").returncode == 0:
        return
    log = Path(os.environ[DATA_ENV]).parent / "server.log"
    done = _pg_ctl("-l", str(log), "-w", "-t", "60", "start")
    assert done.returncode == 0, done.stderr
