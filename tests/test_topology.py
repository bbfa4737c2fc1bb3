import pickle

import pytest

from node.topology import Topology, TopologyError, parse_coord, parse_coords


@pytest.mark.parametrize(
    ("spec", "cols", "rows", "kind"),
    [("mesh:8x8", 8, 8, "mesh"), ("torus:20x10", 20, 10, "torus"), (" mesh : 3 X 2 ", 3, 2, "mesh")],
)
def test_parse(spec: str, cols: int, rows: int, kind: str) -> None:
    t = Topology.parse(spec)
    assert (t.kind, t.cols, t.rows) == (kind, cols, rows)


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("mesh8x8", "expected 'mesh:MxN'"),
        ("ring:4x4", "expected 'mesh:MxN'"),
        ("mesh:0x4", "at least 1"),
        ("mesh:1x1", "single node"),
        ("torus:2x5", "at least 3 columns"),
        ("mesh:5000x2", "exceeds the limit"),
    ],
)
def test_bad_topologies_name_the_cause(spec: str, needle: str) -> None:
    with pytest.raises(TopologyError, match=needle):
        Topology.parse(spec)


def test_mesh_neighbours_and_edges() -> None:
    t = Topology.parse("mesh:3x2")
    assert t.neighbours((0, 0)) == {"+x": (1, 0), "+y": (0, 1)}
    assert t.ports((1, 1)) == ("+x", "-x", "-y")
    assert len(list(t.links())) == 2 * (2 * 2 + 3 * 1)


def test_torus_wraps_and_distance_takes_shorter_way() -> None:
    t = Topology.parse("torus:8x5")
    assert t.neighbour((0, 0), "-x") == (7, 0)
    assert t.neighbour((3, 4), "+y") == (3, 0)
    assert t.offset((0, 0), (7, 0)) == (-1, 0)
    assert t.offset((0, 0), (4, 0)) == (4, 0)  # exactly half: + direction
    assert t.distance((1, 1), (6, 4)) == 3 + 2
    assert t.diameter == 4 + 2
    assert t.xy_path((0, 0), (7, 4)) == [(0, 0), (7, 0), (7, 4)]


def test_mesh_distance_and_xy_path() -> None:
    t = Topology.parse("mesh:8x8")
    assert t.distance((0, 0), (4, 6)) == 10
    assert t.xy_path((2, 2), (0, 3)) == [(2, 2), (1, 2), (0, 2), (0, 3)]
    assert t.diameter == 14


def test_a_topology_pickles_as_itself() -> None:
    """Plans go to worker processes pickled (the compiled build restores frozen classes by __reduce__)."""
    for spec in ("mesh:4x3", "torus:5x7"):
        t = Topology.parse(spec)
        back = pickle.loads(pickle.dumps(t))
        assert back == t and back.spec == spec and hash(back) == hash(t)


def test_check_coordinates() -> None:
    t = Topology.parse("mesh:4x4")
    assert t.check((3, 3)) == (3, 3)
    with pytest.raises(TopologyError, match=r"\(4,0\) is outside mesh:4x4"):
        t.check((4, 0), "destination")
    with pytest.raises(TopologyError, match="not an"):
        t.check(("a", 1))


def test_parse_coords() -> None:
    assert parse_coords("4,6 6,6;(0,2)") == [(4, 6), (6, 6), (0, 2)]
    with pytest.raises(ValueError, match="'4'"):
        parse_coord("4")
    with pytest.raises(ValueError, match="integers"):
        parse_coord("a,b")
