import pytest
from hypothesis import given
from hypothesis import strategies as st

from catalog import names


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


@given(st.lists(_part.filter(lambda p: p not in (".", "..")), min_size=1, max_size=5))
def test_join_parse_round_trip(parts: list[str]) -> None:
    assert names.parse(names.join(parts)) == tuple(parts)
