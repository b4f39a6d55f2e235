"""service.testing: the ports test servers bind."""

from __future__ import annotations

import socket

from service.testing import free_port


def _ephemeral_range() -> tuple[int, int]:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low, high = (int(x) for x in f.read().split())
    return low, high


def test_free_ports_lie_below_the_ephemeral_range_clients_take_their_source_ports_from() -> None:
    low, _ = _ephemeral_range()
    ports = [free_port() for _ in range(50)]
    assert all(port < low for port in ports), sorted(ports)
    for port in ports[:5]:  # and each is bindable
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_a_port_in_use_is_never_handed_out() -> None:
    held = []
    try:
        for _ in range(20):
            sock = socket.socket()
            sock.bind(("127.0.0.1", free_port()))
            sock.listen()
            held.append(sock)
        taken = {s.getsockname()[1] for s in held}
        assert len(taken) == 20
        assert not taken & {free_port() for _ in range(200)}
    finally:
        for sock in held:
            sock.close()
