"""kvclient.transport: error responses become the embedded store's own exceptions."""

from __future__ import annotations

import json

import pytest

from kvclient.transport import raise_error
from kvstore.errors import CommitError, CommitNotLandedError, NotWrittenError, ObjectStoreError
from service.errors import to_api_error


@pytest.mark.parametrize(
    ("error", "base"),
    [(CommitNotLandedError("the commit of version 7 did not land"), CommitError),
     (NotWrittenError("writing 'x' failed: no space left"), ObjectStoreError)],
)
def test_a_definite_failure_keeps_its_class_over_http(error: Exception, base: type[Exception]) -> None:
    """Issue 35: a commit the storage refused is, remotely too, one that did not land."""
    api = to_api_error(error)
    assert api is not None
    body = json.dumps({"error": {"type": api.error_type, "message": api.message, "code": api.status}}).encode()
    with pytest.raises(type(error), match=str(error)) as caught:
        raise_error(api.status, body)
    assert isinstance(caught.value, base)
