import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import catalog
from catalog import names

NFC_CAFE = "caf\u00e9"
NFD_CAFE = "cafe\u0301"


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("", "part 1 is empty"),
        ("a..b", "part 2 is empty"),
        ("a.", "part 2 is empty"),
        ("a/b", "'/'"),
        ("a\\b", "'\\\\'"),
        ("a\x00b", "'\\x00'"),
        ("a\nb", "'\\n'"),
        ("x" * 256, "longer than 255"),
    ],
)
def test_bad_names_name_the_part(bad: str, fragment: str) -> None:
    with pytest.raises(ValueError) as err:
        names.parse_namespace(bad)
    assert fragment in str(err.value)


def test_dot_parts_and_depth() -> None:
    with pytest.raises(ValueError, match="is '..'|is empty"):
        names.parse(("a", ".."))
    with pytest.raises(ValueError, match="more than 16 parts"):
        names.parse_namespace(".".join("a" * 17))


def test_types() -> None:
    with pytest.raises(TypeError):
        names.parse_namespace(None)
    with pytest.raises(TypeError):
        names.parse_namespace(b"a")
    with pytest.raises(TypeError):
        names.parse(("a", 1))


def test_table_name_needs_namespace() -> None:
    assert names.split_table_name("a.b.t") == (("a", "b"), "t")
    with pytest.raises(ValueError, match="needs a namespace"):
        names.split_table_name("t")


_part = st.text(st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="./\\\x00"), min_size=1, max_size=20)


@given(st.lists(_part.filter(lambda p: p not in (".", "..") and unicodedata.is_normalized("NFC", p)), min_size=1, max_size=5))
def test_join_parse_round_trip(parts: list[str]) -> None:
    assert names.parse(names.join(parts)) == tuple(parts)


# Letters with combining marks, precomposed forms, and singletons whose NFC is another
# character (U+212B ANGSTROM SIGN, U+2126 OHM SIGN): NFC and non-NFC parts both come up.
_unicode_part = st.text(
    st.sampled_from(["e", "\u0301", "\u00e9", "A", "\u030a", "\u00c5", "\u212b", "\u2126", "\u1100", "\u1161", "x"]),
    min_size=1,
    max_size=6,
)


@given(st.one_of(_unicode_part, _part.filter(lambda p: p not in (".", ".."))))
def test_a_part_is_accepted_exactly_when_it_is_nfc(part: str) -> None:
    if unicodedata.is_normalized("NFC", part):
        assert names.parse(("ns", part)) == ("ns", part)
    else:
        with pytest.raises(ValueError, match="part 2 .* is not in Unicode NFC"):
            names.parse(("ns", part))


def test_nfd_and_nfc_spellings_are_not_two_namespaces(tmp_path: Path) -> None:
    assert unicodedata.normalize("NFC", NFD_CAFE) == NFC_CAFE != NFD_CAFE
    with catalog.open(str(tmp_path / "lake")) as lake:
        lake.create_namespace(NFC_CAFE)
        for call in (
            lambda: lake.create_namespace(NFD_CAFE),
            lambda: lake.create_namespace(f"{NFC_CAFE}.{NFD_CAFE}"),
            lambda: lake.namespace_exists(NFD_CAFE),
            lambda: lake.create_view(f"{NFC_CAFE}.{NFD_CAFE}", "SELECT 1"),
            lambda: lake.rename_table(f"{NFC_CAFE}.t", f"{NFC_CAFE}.{NFD_CAFE}"),
        ):
            with pytest.raises(ValueError, match=f"is not in Unicode NFC: write it as '{NFC_CAFE}'"):
                call()
        assert lake.list_namespaces() == [NFC_CAFE]
        assert lake.list_views(NFC_CAFE) == []
