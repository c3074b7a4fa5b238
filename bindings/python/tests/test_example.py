"""The examples run as the README says. examples/python/workshop.py, on the workshop's table, and ends as examples/embed.rs
does: Mia's approval fails because she may not set prices, Noor's runs as Noor."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from conftest import FIXTURES, ROOT
from service_support import Service, approve, raw


def test_the_workshop_example_runs_as_the_readme_says() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "python" / "workshop.py"), str(FIXTURES / "workshop.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "  SetPrice: proposed as P-1 (waiting), proposed `SetPrice`: waiting on a decision from Mia" in out
    assert "      repair = Ticket T-7" in out
    assert (
        "  refused: `Estimator` runs `SetPrice` on behalf of `Mia`, who may not: only a manager may set a price" in out
    )
    assert "  P-1 is now failed; the price is 0" in out
    assert "  P-2 is done: Noor approved SetPrice and it ran as Noor; the price is 45" in out
    # 21 events of the two requests, the table's install and each request's task binding.
    assert "audit (24 events):" in out
    assert "audit (24 events):\n  table_installed " in out


def test_the_client_example_runs_against_the_real_service(permitd: Path, workdir: Path) -> None:
    """examples/python/client.py against `permitd` on the workshop's table: it proposes, waits while Noor
    approves with her own key, then claims, confirms, runs and reports the receipt, as the README shows."""
    service = Service.on_fixture(permitd, "workshop", workdir)
    try:
        (workdir / "host.key").write_text(service.key("--agents", "Estimator", "--label", "the workshop app"))
        noor = service.key("--person", "Noor")
        example = subprocess.Popen(
            [sys.executable, str(ROOT / "examples" / "python" / "client.py"), service.url, str(workdir / "host.key")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while (status := raw(service.url, noor, "GET", "/v1/proposals/P-1")[0]) != 200:
            assert time.monotonic() < deadline, f"no proposal P-1 ({status})"
            time.sleep(0.1)
        fingerprint = raw(service.url, noor, "GET", "/v1/proposals/P-1")[1]["fingerprint"]
        approve(service.url, noor, "P-1", fingerprint)
        out, err = example.communicate(timeout=120)
        assert example.returncode == 0, err
        assert out.splitlines() == [
            "P-1 waiting [('repair', 'Ticket T-7'), ('price', '45')] proposed `SetPrice`: waiting on a decision from Mia",
            "P-1 granted Noor",
            "done Noor {'price': 45, 'set_as': 'Noor'}",
        ]
    finally:
        service.stop()
