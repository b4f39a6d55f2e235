"""Keys and values over HTTP have exactly one text each.

Path keys are unpadded base64url (RFC 4648 §5) and body fields standard
base64 (§4), as documented; the decoders used to accept the other alphabet
(``a+b`` and ``a-b`` were one key), padding in paths, and set bits after the
last byte (``YQ`` and ``YR`` were one key). Every text a decoder accepts is
now the encoder's own output for what it decodes to; the rest is a 400
naming the field. Checked on the codec (a property over random bytes) and
end to end on a server, with the Python client as the encoder.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from http_client import call_json

import kvclient
from kvclient.transport import path_key
from service.codec import b64decode, b64encode, path_key_decode, path_key_encode
from service.errors import ApiError
from service.testing import ServerProcess

# 0-2 bytes cover every length class; + and / appear in the standard alphabet for these.
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/="


@given(st.binary(max_size=64))
def test_both_codecs_round_trip(data: bytes) -> None:
    assert path_key_decode(path_key_encode(data), "key") == data
    assert b64decode(b64encode(data), "value") == data
    assert path_key(data) == path_key_encode(data) if data else True  # the client writes what the server reads


@given(st.text(alphabet=ALPHABET, max_size=9))
def test_a_path_key_is_accepted_only_in_its_one_canonical_form(text: str) -> None:
    try:
        data = path_key_decode(text, "key")
    except ApiError as refused:
        assert (refused.status, refused.error_type) == (400, "ValueError")
        assert refused.message.startswith("key is not valid unpadded base64url") and repr(text) in refused.message
        return
    assert path_key_encode(data) == text


@given(st.text(alphabet=ALPHABET, max_size=12))
def test_a_body_field_is_accepted_only_in_its_one_canonical_form(text: str) -> None:
    try:
        data = b64decode(text, "ops[0].key")
    except ApiError as refused:
        assert (refused.status, refused.error_type) == (400, "ValueError")
        assert refused.message.startswith("ops[0].key is not valid base64") and repr(text) in refused.message
        return
    assert b64encode(data) == text


@pytest.mark.parametrize("text", ["a+b", "a/b", "-_8=", "YQ==", "YQ=", "YR", "Y", "++8"])
def test_the_other_alphabet_padding_and_stray_bits_are_refused_in_paths(text: str) -> None:
    with pytest.raises(ApiError, match="key is not valid unpadded base64url"):
        path_key_decode(text, "key")


@pytest.mark.parametrize("text", ["-_8=", "YR==", "YWJj=", "YQ", "YQ==YQ=="])
def test_the_other_alphabet_padding_and_stray_bits_are_refused_in_bodies(text: str) -> None:
    with pytest.raises(ApiError, match="value is not valid base64"):
        b64decode(text, "value")


# -- a real server ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("codec-server")
    process = ServerProcess(str(root / "lake"), root / "server.log").start()
    try:
        yield process
    finally:
        process.stop()


def test_a_standard_alphabet_key_is_a_400_and_not_the_url_safe_one(server: ServerProcess) -> None:
    key = b"\xfb\xef\xff"  # standard '++//', base64url '--__'
    assert path_key_encode(key) == "--__"
    assert call_json(server, "PUT", "/kv/v1/keys/--__", {"value": base64.b64encode(b"one").decode()})[0] == 200
    for method, payload in (("GET", None), ("PUT", {"value": base64.b64encode(b"two").decode()}), ("DELETE", None)):
        status, body = call_json(server, method, "/kv/v1/keys/++__", payload)
        assert status == 400, (method, body)
        assert body["error"]["message"].startswith("key is not valid") and "'++__' has the character '+'" in body["error"]["message"]
    status, body = call_json(server, "GET", "/kv/v1/keys/--__")
    assert status == 200 and base64.b64decode(body["value"]) == b"one"  # untouched by the refused PUT
    # Padding, stray bits, and the same in a scan bound.
    assert call_json(server, "GET", "/kv/v1/keys/YQ==")[0] == 400
    assert call_json(server, "GET", "/kv/v1/keys/YR")[0] == 400
    status, body = call_json(server, "GET", "/kv/v1/scan?prefix=%2B%2B")
    assert status == 400 and body["error"]["message"].startswith("prefix is not valid unpadded base64url")
    # In a body: the stray-bit twin of a key is refused, naming the field.
    status, body = call_json(server, "POST", "/kv/v1/batch", {"ops": [{"op": "put", "key": "YR==", "value": "YQ=="}]})
    assert status == 400 and body["error"]["message"] == (
        "ops[0].key is not valid base64 (RFC 4648 §4): 'YR==' is not canonical, 'YQ==' is"
    ), body


def test_the_python_client_writes_the_url_safe_alphabet(server: ServerProcess) -> None:
    keys = [bytes([a, b]) for a in (0xFB, 0xFF, 0x3E, 0x3F) for b in (0xEF, 0xFF, 0x00)]
    with kvclient.open_remote(server.url) as remote:
        for key in keys:
            remote.put(key, key)
        assert all(remote.get(key) == key for key in keys)
        assert dict(remote.scan(prefix=b"\x3f")) == {k: k for k in keys if k.startswith(b"\x3f")}
