"""What every consumer of the settings' defaults sees, run in a fresh interpreter over a copy of the
sources whose declarations ``tests/test_defaults.py`` changed: ``python settings_probe.py EXPECTED``
(JSON: the default each declaration now says) prints one line per consumer that sees another value
and exits 1 if there is one, else 0. The consumers: the settings classes and the wire's ``assign``,
the engines, the reference models, the reproductions, ``--help`` and ``--print-config``."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tomllib
from pathlib import Path
from typing import Any


def probe(expected: dict[str, Any]) -> list[str]:
    """Every place where a consumer does not see ``expected`` (setting name -> default)."""
    import coordinator.reproduce as reproduce_package
    from coordinator.cli import build_parser
    from coordinator.cli import main as cli_main
    from coordinator.runtimes.model import run_model
    from coordinator.runtimes.records import RunSettings
    from coordinator.workloads.plan import Multicast, Plan
    from node import protocol
    from node.routing import registry
    from node.settings import NodeSettings, settings_of
    from node.switching.engine import Engine
    from node.switching.factory import LockstepWormhole, make_engine
    from node.topology import Topology

    bad: list[str] = []

    def see(where: str, name: str, got: Any) -> None:
        want = expected[name]
        if got != want and not (isinstance(got, float) and got == float(want)):
            bad.append(f"{where}: {name} = {got!r}, not the declared {want!r}")

    root = Path(os.environ["PYTHONPATH"].split(os.pathsep)[0]).resolve()
    if not Path(protocol.__file__).resolve().is_relative_to(root):
        return [f"the probe imported {protocol.__file__}, not the copy under {root}"]
    node_names = {f.name for f, _ in settings_of(NodeSettings)}
    assign = protocol.Assign(run="r", topology="mesh:4x4", node=(0, 0))
    wire = {k: v for k, v in assign.to_wire().items() if k not in node_names}
    decoded = protocol.decode(protocol.encode(protocol.Assign.from_wire(wire)))
    for name in expected:
        if name in ("prep", "hop_limit"):
            continue
        see("RunSettings()", name, getattr(RunSettings(), name))
        see("RunSettings.from_wire({})", name, getattr(RunSettings.from_wire({}), name))
        if name in node_names:
            see("NodeSettings()", name, getattr(NodeSettings(), name))
            see("assign", name, getattr(assign, name))
            see("an assign without it, decoded", name, getattr(decoded, name))

    # the engines, built from default settings as a node builds them
    topo = Topology.parse("mesh:4x4")
    worm = make_engine(topo, (1, 1), registry, RunSettings(switching="wormhole", contention="shared"))
    packets = make_engine(topo, (1, 1), registry, RunSettings(contention="shared"))
    for name in ("flits", "ts", "buffer_flits", "vcs"):
        see("the wormhole engine", name, getattr(worm, name))
    assert isinstance(worm, LockstepWormhole) and isinstance(packets, Engine)
    see("the wormhole engine", "prep", dict(worm.prep))
    for engine, what in ((worm, "the wormhole engine"), (packets, "the packet engine")):
        see(what, "port_model", "one-port" if engine.one_port else "all-port")
        see(what, "hop_limit", engine.hop_limit)
    see("the packet engine", "policy", "drop" if packets.drop_when_full else "block")

    # the reference models: a one-hop unicast arrives at Ts + L + 1 (its prep is 0)
    plan = Plan(topo, (Multicast(0, "unicast", (0, 0), ((1, 0),), 0),))
    raw = run_model(plan, RunSettings(switching="wormhole", contention="shared", port_model="all-port"))
    see("the wormhole model's arrival - L - 1", "ts", raw.arrivals[0].step - expected["flits"] - 1)
    see("the wormhole model's arrival - Ts - 1", "flits", raw.arrivals[0].step - expected["ts"] - 1)

    # the reproductions: every module constant or settings record that names a default
    import importlib
    import pkgutil

    constants = {"FLITS": "flits", "TS": "ts", "BUFFER_FLITS": "buffer_flits", "VCS": "vcs"}
    for info in pkgutil.iter_modules(reproduce_package.__path__):
        module = importlib.import_module(f"coordinator.reproduce.{info.name}")
        for attr, value in vars(module).items():
            setting = constants.get(attr)
            if setting is not None and type(value) is type(expected[setting]):
                see(f"coordinator.reproduce.{info.name}.{attr}", setting, value)
    from coordinator.reproduce import tasnem

    for name in ("flits", "ts", "buffer_flits", "vcs", "vc_classes"):
        see("coordinator.reproduce.tasnem.WORMHOLE", name, getattr(tasnem.WORMHOLE, name))

    # --help: each option's line ends with the declared default
    parser = build_parser()
    commands: Any = next(a for a in parser._actions if a.dest == "command")
    run: argparse.ArgumentParser = commands.choices["run"]
    formatter = run._get_formatter()
    for f, meta in settings_of(RunSettings):
        if f.name in expected and meta.flag is not None and f.default is not None:
            action = run._option_string_actions[meta.flag]
            text = " ".join((formatter._get_help_string(action) or "").split()) % {"default": action.default}
            value = expected[f.name]
            if (
                f"default: {value}" not in text
                and f"default: {float(value) if type(value) is int else value}" not in text
            ):
                bad.append(f"--help of {meta.flag}: {text!r} does not say the declared default {value!r}")
    prep_help = run._option_string_actions["--prep"].help or ""
    if ", ".join(f"{a} {c}" for a, c in expected["prep"].items()) not in prep_help:
        bad.append(f"--help of --prep: {prep_help!r} does not list the declared table {expected['prep']}")

    # --print-config: the experiment file says each default
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = cli_main(["run", "--topology", "mesh:4x4", "--algorithm", "vh", "--print-config"])
    options = tomllib.loads(out.getvalue())["options"] if status == 0 else {}
    for f, meta in settings_of(RunSettings):
        if f.name in expected and meta.flag is not None and not meta.unset and f.default is not None:
            see("--print-config", f.name, options.get(meta.flag[2:]))
    return bad


if __name__ == "__main__":
    found = probe(json.loads(sys.argv[1]))
    print("\n".join(found))
    sys.exit(1 if found else 0)
