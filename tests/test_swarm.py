"""The swarm runtime's pure parts: placement, the stack file, naming the hosts of lost nodes.

Runs on the lab's swarm of hosts are in tests/test_swarm_runs.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.runtimes.containers import BROKER_PASSWORD_FILE, render_yaml
from coordinator.runtimes.records import RawRun
from coordinator.runtimes.swarm import SwarmHost, lost_by_host, place, stack_document
from node.topology import Topology

HOSTS = [SwarmHost(f"id{k}", f"lab{k}", role="manager" if k == 1 else "worker", labels={"rack": f"r{k % 2}"})
         for k in (1, 2, 3)]  # fmt: skip


def test_blocks_cut_the_nodes_into_contiguous_blocks_one_per_usable_host() -> None:
    topo = Topology.parse("mesh:4x4")
    placed = place(topo, HOSTS, "blocks")
    assert placed is not None and set(placed) == set(topo.nodes())
    order = [placed[n] for n in sorted(topo.nodes())]
    # contiguous: each host's nodes form one run of the row-major order, in host order
    assert order == sorted(order, key=[f"node.id == id{k}" for k in (1, 2, 3)].index)
    sizes = sorted(order.count(f"node.id == id{k}") for k in (1, 2, 3))
    assert sizes == [5, 5, 6]


def test_blocks_leave_out_hosts_that_are_down_or_drained() -> None:
    topo = Topology.parse("torus:4x4")
    hosts = [HOSTS[0], SwarmHost("id2", "lab2", state="down"), SwarmHost("id3", "lab3", availability="drain")]
    placed = place(topo, hosts, "blocks")
    assert placed is not None and set(placed.values()) == {"node.id == id1"}
    with pytest.raises(ValueError, match="no usable"):
        place(topo, hosts[1:], "blocks")


def test_label_placement_blocks_over_the_label_s_values() -> None:
    topo = Topology.parse("mesh:4x2")
    placed = place(topo, HOSTS, "label:rack")
    assert placed is not None and set(placed.values()) == {"node.labels.rack == r0", "node.labels.rack == r1"}
    assert [placed[n] for n in sorted(topo.nodes())] == ["node.labels.rack == r0"] * 4 + [
        "node.labels.rack == r1"
    ] * 4
    with pytest.raises(ValueError, match="label 'zone'"):
        place(topo, HOSTS, "label:zone")


def test_spread_leaves_placement_to_the_swarm_and_unknown_ones_are_named() -> None:
    assert place(Topology.parse("mesh:2x2"), HOSTS, "spread") is None
    for bad in ("round-robin", "label:", ""):
        with pytest.raises(ValueError, match="unknown swarm placement"):
            place(Topology.parse("mesh:2x2"), HOSTS, bad)


def test_the_stack_file_has_nodes_and_broker_on_the_overlay_and_no_coordinator(tmp_path: Path) -> None:
    topo = Topology.parse("mesh:2x3")
    placed = place(topo, HOSTS, "blocks")
    doc = stack_document(topo, "s1234", constraints=placed, directory=tmp_path)
    services = doc["services"]
    assert set(services) == {"broker", *(f"node-{x}-{y}" for x, y in topo.nodes())}
    assert doc["networks"] == {"mesh": {"driver": "overlay", "attachable": True}}
    for name, svc in services.items():
        assert svc["networks"] == ["mesh"], name
        assert svc["deploy"]["restart_policy"] == {"condition": "none"}, name
        assert "depends_on" not in svc and "build" not in svc and "pull_policy" not in svc, name
        if name != "broker":
            assert svc["env_file"] == [str(tmp_path / "mqtt.env")], name
    broker = services["broker"]
    assert "volumes" not in broker and broker["deploy"]["placement"] == {
        "constraints": ["node.role == manager"]
    }
    assert {c["target"] for c in broker["configs"]} == {
        "/mosquitto/config/mosquitto.conf",
        BROKER_PASSWORD_FILE,
    }
    assert doc["configs"]["mosquitto_passwd"] == {"file": str(tmp_path / "mosquitto.passwd")}
    assert placed is not None
    for (x, y), constraint in placed.items():
        node = services[f"node-{x}-{y}"]
        assert node["deploy"]["placement"] == {"constraints": [constraint]}
        assert node["environment"]["MESHCAST_CLOCK_HOST"] == "{{.Node.Hostname}}"
        assert node["environment"]["MESHCAST_NODE"] == f"{x},{y}"
    spread = stack_document(topo, "s1234", constraints=None, directory=tmp_path)
    assert all("placement" not in s["deploy"] for n, s in spread["services"].items() if n != "broker")
    text = render_yaml(doc)
    assert "coordinator" not in text and ("'{{.Node.Hostname}}'" in text or '"{{.Node.Hostname}}"' in text)


def test_lost_nodes_are_named_with_the_swarm_node_that_ran_them() -> None:
    raw = RawRun()
    raw.placement = {(0, 0): ("lab1", "id1aaaaaaaaaaaaa"), (0, 1): ("lab3", "id3bbbbbbbbbbbbb"),
                     (1, 1): ("lab3", "id3bbbbbbbbbbbbb")}  # fmt: skip
    raw.node_status = {(0, 0): "stopped while waiting for 'plan'", (0, 1): "lost: no heartbeat",
                       (1, 1): "lost: its broker connection died"}  # fmt: skip
    assert lost_by_host(raw) == ["swarm node lab3 (id3bbbbbbbbb) lost 2 node(s): (0,1), (1,1)"]
    raw.node_status[(1, 1)] = raw.node_status[(0, 1)] = "ok"
    assert lost_by_host(raw) == []


def test_a_silent_node_is_lost_with_the_others_of_its_host() -> None:
    """A node with no final report, on a host that lost others, is named with them (its loss was
    declared after the run's end); silent nodes on a host that lost none are not named."""
    raw = RawRun()
    lab3 = ("lab3", "id3bbbbbbbbbbbbb")
    raw.placement = {(0, 0): ("lab1", "id1aaaaaaaaaaaaa"), (1, 0): ("lab1", "id1aaaaaaaaaaaaa"),
                     (0, 1): lab3, (1, 1): lab3, (2, 1): lab3}  # fmt: skip
    raw.node_status = {(0, 0): "ok", (1, 1): "lost: its broker connection died"}
    assert lost_by_host(raw) == ["swarm node lab3 (id3bbbbbbbbb) lost 3 node(s): (0,1), (1,1), (2,1)"]


def test_a_node_that_reported_before_its_host_went_is_named_as_one_the_host_also_ran() -> None:
    """CI on 7 Dec (after the silent-node mend): lab3 held five nodes, three were lost, and two
    had answered the run's stop before lab3 went; the line names all five, and which were lost."""
    raw = RawRun()
    lab3 = ("lab3", "id3bbbbbbbbbbbbb")
    raw.placement = {(0, 0): ("lab1", "id1aaaaaaaaaaaaa"), (0, 1): lab3, (1, 1): lab3, (2, 1): lab3,
                     (3, 1): lab3}  # fmt: skip
    raw.node_status = {(0, 0): "ok", (0, 1): "ok", (1, 1): "lost: its broker connection died",
                       (3, 1): "stopped by the coordinator at step 7"}  # fmt: skip
    assert lost_by_host(raw) == [
        "swarm node lab3 (id3bbbbbbbbb) lost 2 node(s): (1,1), (2,1); it also ran (0,1), (3,1)"
    ]


def test_unsynchronised_host_clocks_never_leak_an_offset_into_latency_or_link_time() -> None:
    """Across real hosts every node stamps with its own host's monotonic clock. The lab's hosts
    share one kernel clock, so the offset is simulated: host b's clock reads 7 s ahead of a's."""
    from coordinator.analysis.fidelity import judge_run
    from coordinator.analysis.metrics import multicast_metrics
    from coordinator.runtimes.records import Arrival, RunSettings
    from coordinator.workloads.plan import Multicast, Plan
    from node.transport.linkmodel import Jitter, LinkModel, LinkSpec

    offset = 7_000_000_000
    topo = Topology.parse("mesh:3x1")  # ids x * rows + y: (0,0) 0, (1,0) 1, (2,0) 2
    plan = Plan(topo, tuple(Multicast(i, "vh", (0, 0), ((2, 0), (1, 0)), 0) for i in range(3)))
    raw = RawRun()
    raw.hosts = {(0, 0): "a", (1, 0): "b", (2, 0): "a"}  # the middle node on the other host
    for i in range(3):
        inj, jit = 1_000_000 * i, 1_000 * i  # each repetition's own injection and a little variance
        raw.injected[i] = (inj, "a")
        # (0,0) sends at +10 µs; (1,0) on b receives at +1 ms, sends at +1.2 ms; (2,0) on a
        # receives at +2.2 ms and delivers at +2.25 ms: 2 ms on links, 250 µs in nodes
        path = (0, inj, inj + 10_000, 1, inj + 1_000_000 + offset, inj + 1_200_000 + offset + jit)
        far = Arrival(i, (2, 0), 2, 2, 1, inj + 2_250_000 + jit, "a", (*path, 2, inj + 2_200_000 + jit))
        mid = Arrival(
            i, (1, 0), 1, 1, 1, inj + 1_050_000 + offset, "b", (0, inj, inj + 10_000, 1, inj + offset)
        )
        raw.arrivals += [far, mid]
    records = multicast_metrics(plan, raw)
    for r in records:
        by_node = {a.node: a for a in r.arrivals}
        far_r, mid_r = by_node[(2, 0)], by_node[(1, 0)]
        # on the source's clock: the latency and its split are exact, the offset cancels on the way back
        assert far_r.wall_ns == 2_250_000 + 1_000 * r.id
        assert far_r.link_ns == 2_000_000 - 10_000 and far_r.node_ns == 250_000 + 10_000 + 1_000 * r.id
        # on another clock: no latency, no split (7 s of offset would have been one)
        assert mid_r.wall_ns is None and mid_r.link_ns is None and mid_r.node_ns is None
    model = LinkModel(LinkSpec(delay=0.001, jitter=Jitter("normal", 0.0001)))
    verdict = judge_run(records, RunSettings(clock="free", link_model=model), raw)
    assert (verdict.clocks, verdict.unpaired) == (2, 3)
    assert (
        "2 host clocks, unsynchronised" in verdict.line()
        and "3 on other hosts have no latency" in verdict.line()
    )
    assert verdict.destinations == 1 and verdict.host_per_hop_ns is not None
    assert verdict.host_per_hop_ns < 1_000_000  # (2.25 ms over 2 hops) - 1 ms: no 7 s in it
