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


@pytest.mark.parametrize("command", [["get", "k"], ["scan"], ["info"], ["log"], ["verify"]])
def test_read_only_commands_on_a_missing_path_create_nothing_and_exit_2(tmp_path, capsys, command) -> None:
    url = str(tmp_path / "typo" / "store")
    assert main([command[0], url, *command[1:]]) == 2
    assert "no lakekv store" in capsys.readouterr().err
    assert not (tmp_path / "typo").exists()


def test_compact_full_needs_once(tmp_path, capsys) -> None:
    url = str(tmp_path / "store")
    assert main(["put", url, "k", "v"]) == 0
    assert main(["compact", url, "--full"]) == 2
    assert "--full needs --once" in capsys.readouterr().err


def test_limit_zero_means_nothing_for_log_and_scan(tmp_path, capsys) -> None:
    url = str(tmp_path / "store")
    for n in range(3):
        assert main(["put", url, f"k{n}", "v"]) == 0
    capsys.readouterr()
    assert main(["scan", url, "--limit", "0"]) == 0
    assert capsys.readouterr().out == ""
    assert main(["log", url, "--limit", "0"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1  # the header only
    assert main(["log", url, "--all"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 + 4  # versions 0..3


def test_text_scan_tells_escapes_from_bytes(tmp_path, capsys) -> None:
    url = str(tmp_path / "store")
    assert main(["put", url, "--hex", "00ff", "01"]) == 0  # bytes 0x00 0xff
    assert main(["put", url, "\\x00\\xff", "literal"]) == 0  # eight characters
    assert main(["put", url, "tab\there", "x"]) == 0
    capsys.readouterr()
    assert main(["scan", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["\\x00\\xff\t\\x01", "\\\\x00\\\\xff\tliteral", "tab\\x09here\tx"]


def test_get_with_bad_hex_names_the_flag(tmp_path, capsys) -> None:
    url = str(tmp_path / "store")
    assert main(["put", url, "k", "v"]) == 0
    assert main(["get", url, "--hex", "zz"]) == 2
    err = capsys.readouterr().err
    assert "--hex: 'zz' is not hex" in err and "fromhex" not in err
