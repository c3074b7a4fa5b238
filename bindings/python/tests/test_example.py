"""examples/python/workshop.py runs as the README says, on the workshop's table, and ends as examples/embed.rs
does: Mia's approval fails because she may not set prices, Noor's runs as Noor."""

from __future__ import annotations

import subprocess
import sys

from conftest import FIXTURES, ROOT


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
