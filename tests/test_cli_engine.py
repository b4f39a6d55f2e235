"""The engine subcommands of the ``lakekv`` CLI, run in-process."""

from __future__ import annotations

import pytest

from kvstore.cli import main


def test_put_get_delete_scan_info_log(tmp_path, capsys) -> None:
    url = str(tmp_path / "store")
    assert main(["put", url, "hello", "world"]) == 0
    assert main(["put", url, "--hex", "00ff", "beef"]) == 0
    assert main(["get", url, "hello"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "world"
    assert main(["scan", url, "--hex"]) == 0
    assert capsys.readouterr().out.splitlines() == ["00ff\tbeef", "68656c6c6f\t776f726c64"]
    assert main(["delete", url, "hello"]) == 0
    assert main(["get", url, "hello"]) == 1
    assert "not found" in capsys.readouterr().err
    assert main(["info", url]) == 0
    out = capsys.readouterr().out
    assert "version    3" in out and "roots      4 objects" in out
    assert main(["log", url, "--limit", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[1].split()[0] == "3"


def test_missing_store_is_a_clean_error(tmp_path, capsys) -> None:
    assert main(["get", str(tmp_path / "nothing"), "k"]) == 2
    assert "no lakekv store" in capsys.readouterr().err


def test_demo_runs_twice(tmp_path, capsys) -> None:
    url = str(tmp_path / "demo")
    assert main(["demo", url]) == 0
    assert main(["demo", url]) == 0
    out = capsys.readouterr().out
    assert out.count("-> OK") == 2
    assert "100 durable commits cost 100 conditional PUTs" in out


def test_usage_errors_exit_2() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["scan"])
    assert exc.value.code == 2
