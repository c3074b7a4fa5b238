"""Shared fixtures: the repository's paths, the runtime's fixture tables, and the real `permitc`, `permitd`
and supplier binaries (built with cargo once per session when the environment does not name them).

Nothing here reaches the network: LangChain's tracing is switched off before any test imports it.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import permits

# The framework adapter's tests must not phone home.
for _name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING"):
    os.environ[_name] = "false"
os.environ.pop("LANGSMITH_API_KEY", None)
os.environ.pop("LANGCHAIN_API_KEY", None)

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "crates" / "permits-runtime" / "tests" / "fixtures"
NOW = 1_767_225_600
DAY = 24 * 60 * 60


def fixture(name: str) -> permits.Table:
    """The runtime's fixture table `name` (crates/permits-runtime/tests/fixtures), as the Rust tests load it."""
    return permits.Table.load(FIXTURES / f"{name}.json")


def _cargo_binary(env: str, args: list[str], path: str) -> Path:
    named = os.environ.get(env)
    if named:
        return Path(named)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    subprocess.run(["cargo", "build", "--locked", "--quiet", *args], cwd=ROOT, check=True)
    return target / "debug" / path


@pytest.fixture(scope="session")
def permitc() -> Path:
    """The real `permitc` (`$PERMITC`, or built with cargo)."""
    return _cargo_binary("PERMITC", ["-p", "permits-cli", "--bin", "permitc"], "permitc")


@pytest.fixture(scope="session")
def supplier_exe() -> Path:
    """The supplier peer of the shop case (`$PERMITS_SUPPLIER`, or `cargo build -p permits --example supplier`)."""
    return _cargo_binary("PERMITS_SUPPLIER", ["-p", "permits", "--example", "supplier"], "examples/supplier")


@pytest.fixture(scope="session")
def permitd() -> Path:
    """The real approval service, `permitd` (`$PERMITD`, or `cargo build -p permits-service`)."""
    return _cargo_binary("PERMITD", ["-p", "permits-service", "--bin", "permitd"], "permitd")


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    """A fresh folder for ledgers, audit files and compiled tables."""
    yield tmp_path


_databases = itertools.count()


def _psql() -> str:
    """The `psql` of the test server's PostgreSQL (on PATH, or in Debian's /usr/lib/postgresql/*/bin)."""
    found = shutil.which("psql")
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/psql"))
    if not candidates:
        raise RuntimeError("no `psql` found: install PostgreSQL's client (Debian: apt-get install postgresql)")
    return str(candidates[-1])


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of its own on the test server `PERMITS_TEST_POSTGRES` names (`.ci/postgres start` starts
    one and prints it), dropped after the test; its `postgres://` URL. Without the variable the test fails,
    saying how to give it: a PostgreSQL test never skips."""
    server = os.environ.get("PERMITS_TEST_POSTGRES")
    if not server:
        pytest.fail(
            "the PostgreSQL tests need a server: set PERMITS_TEST_POSTGRES to a URL whose user may create "
            'databases, e.g. `eval "$(.ci/postgres start)"` at the repository\'s root'
        )
    name = f"permits_py_{os.getpid()}_{next(_databases)}"
    psql = _psql()
    subprocess.run([psql, server, "-qc", f"CREATE DATABASE {name}"], check=True)
    try:
        yield f"{server.rsplit('/', 1)[0]}/{name}"
    finally:
        subprocess.run([psql, server, "-qc", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], check=False)
