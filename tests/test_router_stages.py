"""The wormhole router's named stages and VC states (docs/architecture.md "Add a router stage").

* an input channel walks IDLE → ROUTING → VC_ALLOC → ACTIVE → IDLE, and a worm that loses VC
  allocation waits in VC_ALLOC holding nothing, named in the deadlock report's terms;
* the engine's ``step`` and the model's cycle run the stages of ``STAGES`` in that order, each
  under its own name in both (the records they must keep are checked by the engine-vs-model
  properties in ``tests/test_wormhole.py`` and ``tests/test_vcs.py``).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from coordinator.runtimes import wormhole_model
from coordinator.workloads.plan import Multicast, Plan
from node import compiled_modules
from node.routing import registry
from node.switching.engine import Injection
from node.switching.wormhole import STAGES, Flit, VcState, WormholeEngine
from node.topology import Topology
from tests.wormhole_helpers import model_run, worm_settings

ROOT = Path(__file__).resolve().parents[1]


def test_an_input_channel_walks_idle_routing_vc_alloc_active() -> None:
    """Worm A arrives on -x and worm B is injected at (1,1), both for +x: A wins VC allocation (its
    input comes first in the fixed order), B waits in VC_ALLOC until A's tail frees the port."""
    topo = Topology.parse("mesh:3x3")
    e = WormholeEngine(topo, (1, 1), registry, worm_settings(flits=3, ts=0))
    assert set(e.states().values()) == {VcState.IDLE}
    ((port, header),) = registry.get("unicast").prepare(topo, (0, 1), [(2, 1)], {})
    assert port == "+x"
    worm = (0, 1, 0)
    e.receive(Flit("H", 0, worm, "unicast", header, 1, 1), "-x")
    e.inject(Injection(1, "unicast", [(2, 1)], {}, 0))
    assert e.states()["-x"] is VcState.ROUTING
    sent = e.step(0)
    assert [(p, f.kind, f.mc) for p, f in sent] == [("+x", "H", 0)]
    states = e.states()
    assert states["-x"] is VcState.ACTIVE and states["inj+x"] is VcState.VC_ALLOC
    (waiting,) = [h for h in e.holdings() if h.mc == 1]
    assert (waiting.channel, waiting.owns, waiting.wants) == ("inj+x", (), ("+x",))
    for t, kind in ((1, "B"), (2, "T")):
        e.credit_back("+x", 1)  # downstream moved our last flit on
        e.receive(Flit(kind, 0, worm), "-x")
        assert [(p, f.kind, f.mc) for p, f in e.step(t)] == [("+x", kind, 0)]
    states = e.states()
    assert states["-x"] is VcState.IDLE and states["inj+x"] is VcState.VC_ALLOC  # granted from the next step
    e.credit_back("+x", 1)
    assert [(p, f.kind, f.mc) for p, f in e.step(3)] == [("+x", "H", 1)]
    assert e.states()["inj+x"] is VcState.ACTIVE


def test_a_tail_with_the_next_head_behind_it_leaves_its_input_routing() -> None:
    topo = Topology.parse("mesh:3x3")
    e = WormholeEngine(topo, (1, 1), registry, worm_settings(flits=2, buffer_flits=3, ts=0))
    ((_, header),) = registry.get("unicast").prepare(topo, (0, 1), [(2, 1)], {})
    e.receive(Flit("H", 0, (0, 1, 0), "unicast", header, 1, 1), "-x")
    e.step(0)
    e.receive(Flit("T", 0, (0, 1, 0)), "-x")
    e.receive(Flit("H", 1, (0, 1, 1), "unicast", header, 1, 1), "-x")
    assert [f.kind for _, f in e.step(1)] == ["T"]
    assert e.states()["-x"] is VcState.ROUTING


def _record(calls: list[str], name: str, fn: Any) -> Any:
    def wrapped(*args: Any, **kw: Any) -> Any:
        calls.append(name)
        return fn(*args, **kw)

    return wrapped


def _cycles(calls: list[str]) -> list[list[str]]:
    """The stages each cycle ran (a cycle starts at ``cycle``)."""
    cycles: list[list[str]] = []
    for c in calls:
        if c == "cycle":
            cycles.append([])
        else:
            cycles[-1].append(c)
    return cycles


def _in_stage_order(calls: list[str]) -> bool:
    """Each cycle ran a subsequence of STAGES, in order, and some cycle ran them all."""
    cycles = _cycles(calls)
    order = list(STAGES)
    return all(cyc == [s for s in order if s in cyc] for cyc in cycles) and order in cycles


@pytest.mark.parametrize("vcs", [1, 2])
def test_the_model_runs_the_named_stages_in_order(vcs: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every stage of STAGES is a method of the model's ``_Model`` under its name, and each cycle
    calls them in that order (each is skipped when it has nothing to do; some cycle runs all). A
    compiled model's methods cannot be wrapped: there the order is read from its cycle's source."""
    if "coordinator/runtimes/wormhole_model.py" in compiled_modules(ROOT / "coordinator"):
        called = _calls_in(ROOT / "coordinator" / "runtimes" / "wormhole_model.py", "run_wormhole_model", "")
        assert all(hasattr(wormhole_model._Model, stage) for stage in STAGES)
        assert called == list(STAGES)
        return
    topo = Topology.parse("torus:4x4")
    plan = Plan(topo, tuple(Multicast(i, "unicast", (i, 0), (((i + 2) % 4, 1),), i % 2) for i in range(4)))
    calls: list[str] = []
    model = wormhole_model._Model
    for stage in STAGES:
        monkeypatch.setattr(model, stage, _record(calls, stage, getattr(model, stage)))
    monkeypatch.setattr(model, "deliver", _record(calls, "cycle", model.deliver))
    raw = model_run(plan, flits=4, ts=0, vcs=vcs)
    assert len(raw.arrivals) == 4 and not raw.incomplete
    assert _in_stage_order(calls)


def _calls_in(path: Path, function: str, prefix: str) -> list[str]:
    """The ``<obj>.<prefix><stage>`` calls of ``function`` (a method or a module's function) in the
    source ``path``, in the order they are evaluated (by where each call ends: an argument's call
    ends, and runs, before the call it is passed to)."""
    fn = next(
        n
        for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.FunctionDef) and n.name == function
    )
    k = len(prefix)
    calls = [
        (n.end_lineno, n.end_col_offset, n.func.attr[k:])
        for n in ast.walk(fn)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.startswith(prefix)
        and n.func.attr[k:] in STAGES
    ]  # fmt: skip
    return [name for *_, name in sorted(calls)]


def _stages_called_by_step() -> list[str]:
    """The ``self._<stage>`` calls of ``WormholeEngine.step``, in the order they are evaluated."""
    return _calls_in(ROOT / "node" / "switching" / "wormhole.py", "step", "_")


@pytest.mark.parametrize("vcs", [1, 2])
def test_the_engine_runs_the_named_stages_in_order(vcs: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every stage of STAGES is a method of the engine (``_`` + its name), and ``step`` calls them
    in that order (here a head arrives while a start-up ends: a step runs all of them). A compiled
    engine's methods cannot be wrapped: there the order is read from ``step``'s source instead."""
    if "node/switching/wormhole.py" in compiled_modules():
        assert sorted(set(_stages_called_by_step()), key=STAGES.index) == list(STAGES)
        assert _stages_called_by_step() == sorted(_stages_called_by_step(), key=STAGES.index)
        return
    topo = Topology.parse("torus:4x4")
    e = WormholeEngine(topo, (0, 0), registry, worm_settings(flits=4, ts=0, vcs=vcs))
    calls: list[str] = []
    for stage in STAGES:
        monkeypatch.setattr(e, f"_{stage}", _record(calls, stage, getattr(e, f"_{stage}")))
    ((_, header),) = registry.get("unicast").prepare(topo, (3, 0), [(1, 0)], {})
    e.receive(Flit("H", 9, (3, 0, 0), "unicast", header, 1, 1), "-x")
    e.inject(Injection(1, "unicast", [(2, 0)], {}, 0))
    for t in range(8):
        calls.append("cycle")
        e.step(t)
    assert _in_stage_order(calls)
