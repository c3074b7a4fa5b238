"""`Table.load(path, trust=[public keys])` with real signed tables: `permitc keygen`, `permitc compile --sign`;
an unsigned table, another key's, a tampered signature, a signature of another table; and a runtime built on a
trusted table refusing an unsigned one and a rollback (the store's serials)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT

import permits


def keygen(permitc: Path, path: Path) -> str:
    subprocess.run([str(permitc), "keygen", "-o", str(path)], check=True, capture_output=True)
    return Path(f"{path}.pub").read_text().strip()


def compile_to(permitc: Path, out: Path, *sign: str, lifetime: str | None = None) -> Path:
    """The workshop policy compiled to `out` (with `proposal_lifetime LIFETIME` added: another table)."""
    policy = ROOT / "policies" / "workshop"
    if lifetime is not None:
        copy = out.with_suffix(".policy")
        shutil.copytree(policy, copy)
        with next(iter(sorted(copy.glob("*.permits")))).open("a") as f:
            f.write(f"\nproposal_lifetime {lifetime}\n")
        policy = copy
    args = [str(permitc), "compile", str(policy), "-o", str(out), *sign]
    subprocess.run(args, check=True, capture_output=True)
    return out


@pytest.fixture
def release(permitc: Path, workdir: Path) -> tuple[str, Path]:
    """A release key (its public half) and the workshop compiled and signed with it at serial 42."""
    public = keygen(permitc, workdir / "release.key")
    table = compile_to(permitc, workdir / "workshop.json", "--sign", str(workdir / "release.key"), "--serial", "42")
    return public, table


def kind_of(path: Path, trust: list[str]) -> str:
    with pytest.raises(permits.TableError) as e:
        permits.Table.load(path, trust=trust)
    return e.value.kind


def test_a_signed_table_loads_with_its_key(release: tuple[str, Path]) -> None:
    public, path = release
    table = permits.Table.load(path, trust=[public])
    signature = table.signature
    assert signature is not None
    assert (signature["serial"], signature["key"], signature["table_digest"]) == (42, public, table.table_digest)
    assert len(signature["signature"]) == 128
    # Without trust the signature is not read.
    assert permits.Table.load(path).signature is None
    assert permits.Table.load(path).table_digest == table.table_digest
    # A runtime on it installs it with its signature, and works.
    rt = permits.Runtime(table, authority=permits.ADMIT_ALL)
    rt.install_table()
    assert rt.level("Estimator", "EstimateRepair", "NoteRepair", {"repair": "T-7", "note": "Pads."}) == "alone"
    assert rt.table.signature == signature


def test_an_unsigned_table_is_refused(permitc: Path, workdir: Path, release: tuple[str, Path]) -> None:
    public, _ = release
    unsigned = compile_to(permitc, workdir / "unsigned.json")
    assert kind_of(unsigned, [public]) == "unsigned"
    with pytest.raises(permits.TableError) as e:
        permits.Table.load(unsigned, trust=[public])
    assert "is not signed" in str(e.value) and "unsigned.json.sig" in str(e.value)


def test_another_keys_table_is_refused(permitc: Path, workdir: Path, release: tuple[str, Path]) -> None:
    public, path = release
    other = keygen(permitc, workdir / "other.key")
    assert kind_of(path, [other]) == "untrusted_key"
    # Trusting both is fine: any one of them may sign.
    assert permits.Table.load(path, trust=[other, public]).signature is not None


def test_a_tampered_signature_is_refused(workdir: Path, release: tuple[str, Path]) -> None:
    public, path = release
    sig_path = Path(f"{path}.sig")
    original = json.loads(sig_path.read_text())
    # A serial raised by hand (to pass a rollback check): the signature no longer verifies.
    sig_path.write_text(json.dumps({**original, "serial": 43}))
    assert kind_of(path, [public]) == "bad_signature"
    # A flipped byte of the signature itself.
    flipped = ("1" if original["signature"][0] != "1" else "2") + original["signature"][1:]
    sig_path.write_text(json.dumps({**original, "signature": flipped}))
    assert kind_of(path, [public]) == "bad_signature"
    # A signature that names another table (the table re-sealed after an edit keeps its old .sig).
    sig_path.write_text(json.dumps({**original, "table_digest": "0" * 64}))
    assert kind_of(path, [public]) == "other_table"
    # Not a signature at all.
    sig_path.write_text("{\"serial\": 1}")
    assert kind_of(path, [public]) == "bad_signature"
    sig_path.write_text(json.dumps(original))
    assert permits.Table.load(path, trust=[public]).signature == original


def test_a_tampered_table_is_refused(release: tuple[str, Path]) -> None:
    public, path = release
    table = json.loads(path.read_text())
    table["package"]["grant_lifetime_seconds"] = 10**9
    path.write_text(json.dumps(table))
    # The digest no longer matches: refused before the signature is read.
    assert kind_of(path, [public]) == "digest_mismatch"


def test_the_runtime_trusts_the_keys_from_then_on(permitc: Path, workdir: Path, release: tuple[str, Path]) -> None:
    public, path = release
    rt = permits.Runtime(permits.Table.load(path, trust=[public]), authority=permits.ADMIT_ALL, store=str(workdir / "l.db"))
    rt.install_table()
    # An unsigned table is not installed by a runtime that trusts keys; the old one stays.
    unsigned = permits.Table.load(compile_to(permitc, workdir / "unsigned.json", lifetime="1d"))
    with pytest.raises(permits.TableError) as e:
        rt.replace_table(unsigned)
    assert e.value.kind == "unsigned"
    assert rt.table.signature is not None
    # An older serial is a rollback; a newer one installs.
    key = str(workdir / "release.key")
    older = compile_to(permitc, workdir / "older.json", "--sign", key, "--serial", "41", lifetime="2d")
    with pytest.raises(permits.TableError) as e:
        rt.replace_table(permits.Table.load(older, trust=[public]))
    assert e.value.kind == "rollback"
    newer = compile_to(permitc, workdir / "newer.json", "--sign", key, "--serial", "43", lifetime="3d")
    rt.replace_table(permits.Table.load(newer, trust=[public]))
    current = rt.table.signature
    assert current is not None and current["serial"] == 43


@pytest.mark.parametrize("trust", [[], "abc", [b"00"], ["not hex"], [7], ("0" * 63,)])
def test_bad_trust_is_input_error(release: tuple[str, Path], trust: object) -> None:
    _, path = release
    with pytest.raises(permits.InputError):
        permits.Table.load(path, trust=trust)  # type: ignore[arg-type]
