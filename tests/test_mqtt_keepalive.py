"""The MQTT keep-alive: its setting, and when paho's housekeeping next has something to do."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from node.transport import mqtt


@pytest.mark.parametrize(
    ("value", "expected"), [(None, 5), ("16", 16), ("5", 5), ("2", 5), ("-1", 5), ("soon", 5), ("", 5)]
)
def test_the_keepalive_is_the_environment_s_never_below_the_default(
    monkeypatch: pytest.MonkeyPatch, value: str | None, expected: int
) -> None:
    if value is None:
        monkeypatch.delenv("MESHCAST_MQTT_KEEPALIVE", raising=False)
    else:
        monkeypatch.setenv("MESHCAST_MQTT_KEEPALIVE", value)
    assert mqtt.keepalive() == expected


def _client(now: float, *, out: float, received: float, ping: float = 0.0, keepalive: int = 5) -> object:
    """A stand-in for paho's client: its keep-alive bookkeeping, ``now`` minus these ages."""
    return SimpleNamespace(
        _keepalive=keepalive, _last_msg_out=now - out, _last_bytes_received=now - received,
        _ping_t=now - ping if ping else 0.0,
    )  # fmt: skip


def test_housekeeping_sleeps_until_the_next_ping_or_ping_timeout() -> None:
    now = mqtt.paho_time()
    # the older of last out / last in decides when paho pings
    assert mqtt._next_keepalive_check(_client(now, out=1.0, received=2.0)) == pytest.approx(3.0, abs=0.05)
    # a ping in flight: its timeout comes first
    waited = mqtt._next_keepalive_check(_client(now, out=0.5, received=0.5, ping=4.0))
    assert waited == pytest.approx(1.0, abs=0.05)
    # overdue: wake soon, but never spin
    assert mqtt._next_keepalive_check(_client(now, out=9.0, received=9.0)) == 0.05
    # never longer than a keep-alive, even if the clocks say so
    assert mqtt._next_keepalive_check(_client(now, out=-60.0, received=-60.0)) == 5.0


def test_housekeeping_falls_back_to_every_second_without_paho_s_bookkeeping() -> None:
    assert mqtt._next_keepalive_check(SimpleNamespace(_keepalive=5)) == 1.0
    now = mqtt.paho_time()
    assert mqtt._next_keepalive_check(_client(now, out=1.0, received=1.0, keepalive=0)) == 1.0
