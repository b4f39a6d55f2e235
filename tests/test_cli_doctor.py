"""``lakekv doctor``: passes on a sound store, fails on one whose conditional create is broken."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from kvstore import cli, doctor
from kvstore.objstore import MemoryStore
from kvstore.doctor import run_doctor


class IgnoresIfNoneMatch(MemoryStore):
    """Like an object store (or proxy) that drops If-None-Match: every PUT wins."""

    def put_if_absent(self, path: str, data: bytes) -> bool:
        self.put(path, data)
        return True


class LosesEveryone(MemoryStore):
    """put_if_absent reports a lost race even when the name was free: no winner at all."""

    def put_if_absent(self, path: str, data: bytes) -> bool:
        super().put_if_absent(path, data)
        return False


def test_doctor_on_local_dir_exits_zero_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["doctor", str(tmp_path / "store"), "--rounds", "5", "--processes", "2", "--samples", "20"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "[ok]   race/threads: 8 threads x 5 rounds" in out
    assert "[ok]   race/processes: 2 processes x 5 rounds" in out
    for label in ("PUT", "GET", "conditional PUT", "p50 ms", "p99 ms", "ops/s"):
        assert label in out
    assert "verdict: SAFE" in out
    # The scratch prefix is gone: only the temp dir remains.
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == [".tmp"]


@pytest.mark.parametrize("broken", [IgnoresIfNoneMatch, LosesEveryone])
def test_doctor_exits_non_zero_on_broken_conditional_create(
    broken: type[MemoryStore], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(doctor, "open_store", lambda url, **options: broken("memory://broken"))
    code = cli.main(["doctor", "memory://broken", "--rounds", "3", "--samples", "5"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "[FAIL] race/threads" in out
    assert "verdict: UNSAFE" in out


def test_doctor_detects_two_winners_in_a_store_object() -> None:
    out = io.StringIO()
    assert run_doctor(IgnoresIfNoneMatch(), rounds=2, samples=0, out=out) is False
    assert "writers won put_if_absent" in out.getvalue()


def test_doctor_on_memory_store_skips_process_race() -> None:
    out = io.StringIO()
    assert run_doctor(MemoryStore(), rounds=2, samples=3, out=out) is True
    assert "[skip] race/processes" in out.getvalue()


def test_doctor_on_lmdb_commit_store_url(tmp_path: Path) -> None:
    out = io.StringIO()
    url = f"{(tmp_path / 'data').as_uri()}?conditional_create=false&commit_store=lmdb:{tmp_path / 'lmdb'}"
    assert run_doctor(url, rounds=3, processes=2, samples=5, out=out) is True, out.getvalue()
    assert "[ok]   race/processes" in out.getvalue()


def test_cli_bad_url_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["doctor", "gs://bucket/x"]) == 2
    assert "scheme 'gs'" in capsys.readouterr().err


def test_cli_rejects_negative_counts() -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["doctor", "memory://x", "--threads", "-1"])
    assert info.value.code == 2


def test_run_doctor_validates_arguments() -> None:
    with pytest.raises(ValueError, match="threads"):
        run_doctor(MemoryStore(), threads=0)
