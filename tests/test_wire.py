import msgpack
import pytest

from node.transport.wire import (
    MAX_FRAME,
    ByeFrame,
    HelloFrame,
    Packet,
    PacketFrame,
    StepFrame,
    WireError,
    decode_control,
    decode_link,
    encode_control,
    encode_link,
)

PKT = Packet(3, "vh", [[1, 2]], 2, 1, 7)


@pytest.mark.parametrize(
    "frame",
    [
        StepFrame(4, 2, (PKT, PKT)),
        StepFrame(0, -1, ()),
        PacketFrame(PKT),
        HelloFrame("tok", (1, 2)),
        ByeFrame(),
    ],
)
def test_round_trip(frame: object) -> None:
    assert decode_link(encode_link(frame)) == frame  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"\xc1\xc1", "not msgpack"),
        (msgpack.packb({"a": 1}), "tagged array"),
        (msgpack.packb(["Q", 1]), "unknown link frame tag"),
        (msgpack.packb(["S", -1, 0, []]), "step must be"),
        (msgpack.packb(["S", 1, 0, [[1, "vh", [], 0, 1, 0]]]), "hops must be"),
        (msgpack.packb(["P", [1, "", [], 1, 1, 0]]), "algorithm must be"),
        (msgpack.packb(["P", [1, "vh", []]]), "6- or 7-element"),
        (msgpack.packb(["H", 5, [1, 2]]), "hello frame"),
        (msgpack.packb(["B", 1]), "unknown link frame tag"),
        (b"\x00" * (MAX_FRAME + 1), "exceeds the limit"),
        ("text", "must be bytes"),
    ],
)
def test_bad_frames_become_errors(data: bytes, needle: str) -> None:
    got = decode_link(data)
    assert isinstance(got, WireError)
    assert needle in got.cause


def test_control_messages() -> None:
    assert decode_control(encode_control({"type": "start"})) == {"type": "start"}
    bad = decode_control(msgpack.packb([1, 2]))
    assert isinstance(bad, WireError)
    assert "type" in bad.cause
