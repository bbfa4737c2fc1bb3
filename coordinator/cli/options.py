"""Options shared by the commands that run an emulation, and their validation.

Every value is checked here, before anything starts: numbers finite and in range, the node
count within what the runtime can host, the broker reachable, algorithm parameters declared.
A bad value is a :class:`~coordinator.errors.UsageError` (one line, exit status 2).
"""

from __future__ import annotations

import argparse
import json
import math
import socket
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from coordinator.analysis.timing import Timing
from coordinator.errors import UsageError
from coordinator.runtimes import registry as runtimes
from coordinator.runtimes.network_modes import NETWORK_ENV, NETWORK_MODES
from coordinator.runtimes.records import TIMING, RunSettings
from node import defaults
from node.choices import Contention
from node.routing import PlanError, UnknownAlgorithm, registry
from node.settings import MAX_COUNT, RUNNING, Setting, number, settings_of
from node.switching.factory import check_switching
from node.topology import Topology, TopologyError
from node.transport.linkmodel import LinkModel, LinkSpec, link_keys, parse_link_file

__all__ = [
    "BROKER_PROBE_S",
    "MAX_COUNT",
    "MAX_NODES",
    "add_run_options",
    "check_broker",
    "check_nodes",
    "check_params",
    "in_range",
    "parse_params",
    "settings_from",
    "timing_from",
    "topology_from",
    "validate_settings",
]

MAX_REPEAT = 100_000
MAX_NODES = {name: r.max_nodes for name, r in runtimes.RUNTIMES.items()}
"""The most nodes each runtime hosts (the registry's: one OS process per node, one container per node)."""
BROKER_PROBE_S = 3.0
SYNCS = defaults.SYNCS
ALDUBAI = "Al-Dubai, Ould-Khaoua & Mackenzie"


def in_range(flag: str, value: float | None, low: float, high: float) -> None:
    """``value`` (None: not given) finite and within [low, high], or a UsageError naming ``flag``."""
    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"{flag} must be a finite number, got {value}")
    if value < low:
        raise UsageError(f"{flag} must be at least {number(low)}, got {value}")
    if value > high:
        raise UsageError(f"{flag} must be at most {number(high)}, got {value}")


def topology_from(text: str) -> Topology:
    """The topology of ``--topology``, or a UsageError."""
    try:
        return Topology.parse(text)
    except TopologyError as exc:
        raise UsageError(str(exc)) from None


def parse_params(items: Sequence[str]) -> dict[str, Any]:
    """``--param NAME=VALUE`` items as a dict (VALUE read as JSON when it is JSON)."""
    out: dict[str, Any] = {}
    for it in items:
        key, sep, value = it.partition("=")
        if not sep or not key:
            raise UsageError(f"--param {it!r}: expected NAME=VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def check_params(algorithms: Sequence[str], params: dict[str, Any]) -> dict[str, Any]:
    """``params`` checked against the algorithms' declared parameters, or a UsageError.

    Each parameter must be declared by at least one of the algorithms, and every algorithm that
    declares it must accept its value (see ``meshcast algorithms`` for the declarations).
    """
    try:
        algs = [registry.get(a) for a in algorithms]
    except UnknownAlgorithm as exc:
        raise UsageError(str(exc)) from None
    for name in params:
        if not any(_accepts(a.name, name) for a in algs):
            known = sorted({p.name for a in algs for p in a.params})
            raise UsageError(
                f"--param {name}: {', '.join(algorithms)} has no parameter of that name "
                f"(allowed: {', '.join(known) or 'none'})"
            )
    for a in algs:
        mine = {k: v for k, v in params.items() if _accepts(a.name, k)}
        try:
            registry.check_params(a.name, mine)
        except PlanError as exc:
            raise UsageError(f"--param: {exc}") from None
    return params


def _accepts(algorithm: str, name: str) -> bool:
    alg = registry.get(algorithm)
    if any(p.name == name for p in alg.params):
        return True
    return any(p.type == "algorithm" for p in alg.params)


def _add_setting(g: Any, name: str, default: Any, meta: Setting, annotation: Any) -> None:
    """One setting's option, from its field: flag, type, default, choices and help."""
    assert meta.flag is not None
    if isinstance(default, bool):  # --x / --no-x
        g.add_argument(
            meta.flag, dest=name, action=argparse.BooleanOptionalAction, default=default, help=meta.help
        )
        return
    kind = meta.kind or next(t for t in (int, float, str) if str(annotation).startswith(t.__name__))
    g.add_argument(
        meta.flag,
        dest=name,
        type=None if meta.choices else kind,
        choices=meta.choices,
        default=None if meta.unset or default is None else kind(default),
        metavar=meta.metavar,
        help=meta.describe() + (f" (default: {default}; {meta.unset})" if meta.unset else ""),
    )


class DeprecatedAlias(argparse.Action):
    """A store action whose later option strings are old names: given one, it warns on stderr
    (one line naming the new name) and stores as the new name does."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        new = self.option_strings[0]
        if option_string is not None and option_string != new:
            print(
                f"meshcast: {option_string} is deprecated and goes in the next release: use {new}",
                file=sys.stderr,
            )
        setattr(namespace, self.dest, values)


def add_run_options(
    p: argparse.ArgumentParser,
    extra_runtimes: dict[str, str] | None = None,
    command: str = "run",
    *,
    network: bool = True,
    settings: Any = RunSettings,
    omit: frozenset[str] = frozenset(),
) -> None:
    """Options shared by every command that runs an emulation: one per field of ``settings`` that
    has a flag (its metadata, :mod:`node.settings`), and ``command``'s runtimes from
    the registry (``extra_runtimes``: name -> help, runtimes only this command offers; ``network``:
    offer ``--network``, which only a command that starts a containers run itself can honour;
    ``omit``: the settings' groups this command does not read: their options are refused, not
    silently ignored)."""
    extra = extra_runtimes or {}
    offered = runtimes.names(command)
    timing = p.add_argument_group(TIMING)
    timing.add_argument(
        "--latency-model",
        "--timing",
        dest="timing",
        action=DeprecatedAlias,
        choices=("store-and-forward", "wormhole"),
        default=None,
        help="report each multicast's latency by this formula too, from its logical steps (off when "
        "not given; not the network's switching, which is --switching); --timing: its old name, "
        "deprecated",
    )
    timing.add_argument(
        "--beta", type=float, default=1.0, help=f"time per flit per link ({ALDUBAI}: 1 cycle)"
    )
    timing.add_argument(
        "--router-delay",
        type=float,
        default=0.0,
        help="per-hop router delay of the latency model, in its time unit (cycles; default 0)",
    )
    groups: dict[str | None, Any] = {None: p, TIMING: timing}
    for f, meta in settings_of(settings):
        if meta.flag is not None and meta.group not in omit:
            if meta.group not in groups:
                groups[meta.group] = p.add_argument_group(meta.group)
            _add_setting(groups[meta.group], f.name, f.default, meta, f.type)
    if RUNNING not in groups:
        groups[RUNNING] = p.add_argument_group(RUNNING)
    where = groups[RUNNING]
    where.add_argument(
        "--runtime",
        choices=(*offered, *(e for e in extra if e not in offered)),
        default="in-process",
        help="; ".join(f"{name}: {runtimes.RUNTIMES[name].summary}" for name in offered)
        + "".join(f"; {name}: {text}" for name, text in extra.items() if name not in offered)
        + " (what each supports: README, 'What runs where')",
    )
    if network:
        where.add_argument(
            "--network",
            choices=NETWORK_MODES,
            default=None,
            help="containers: bridge: every node container a host of its own (its namespace and "
            "address on the run's compose network); pod: all in one namespace, faster to start, but "
            "the links share one loopback (no node's network of its own to cut or shape); host: the "
            f"host's network. Default: ${NETWORK_ENV} if set, else bridge (docs/deploy.md)",
        )


def link_model_from(settings: RunSettings, topology: Topology | None) -> LinkModel | None:
    """The link model of the ``link_*`` settings (``--link-KEY`` for each key of a link's
    behaviour, and ``--link-file``), checked against ``topology``; None when none is given."""
    words = {k: v for k in link_keys() if (v := getattr(settings, f"link_{k}")) is not None}
    path = settings.link_file
    if not words and path is None:
        return None
    try:
        model = LinkModel(LinkSpec().merged(words), seed=settings.seed)
        if path is not None:
            try:
                text = Path(path).read_text()
            except OSError as exc:
                raise UsageError(f"--link-file {path}: {exc.strerror or exc}") from None
            model = parse_link_file(text, model, f"--link-file {path}")
        if topology is not None:
            model.check(topology)
    except (ValueError, TypeError) as exc:
        raise UsageError(
            f"link model: {exc}" if not str(exc).startswith(("link", "--link")) else str(exc)
        ) from None
    return model


def check_timing_params(args: argparse.Namespace) -> None:
    """``--ts``, ``--beta``, ``--router-delay`` and ``--flits`` in range, or a UsageError.

    Checked whether or not ``--latency-model`` or ``--switching wormhole`` uses them: a value no run can
    use is a mistake to hear of at once, not one a run silently ignores or the wire refuses later.
    """
    for flag in ("--beta", "--router-delay"):
        in_range(flag, getattr(args, flag[2:].replace("-", "_"), None), 0, 1e12)
    for f, meta in settings_of(RunSettings):
        if meta.group == TIMING and meta.low is not None and meta.high is not None:
            in_range(str(meta.flag), getattr(args, f.name, None), meta.low, meta.high)


def timing_from(args: argparse.Namespace) -> Timing | None:
    """The timing model of ``--latency-model`` and its parameters, or None."""
    check_timing_params(args)
    if getattr(args, "timing", None) is None:
        return None
    try:
        return Timing(args.timing, args.ts, args.beta, args.flits, args.router_delay)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def validate_settings(settings: RunSettings) -> RunSettings:
    """``settings`` if every field is in range and the runtime is available, else a UsageError."""
    for f, meta in settings_of(type(settings)):  # each setting's range, from its field
        if meta.low is not None and meta.high is not None:
            in_range(meta.flag or f.name, getattr(settings, f.name), meta.low, meta.high)
    why = check_switching(_as_engines_run_it(settings))
    if why is not None:
        raise UsageError(f"--switching {settings.switching}: {why}")
    if settings.sync is not None and settings.sync not in SYNCS:
        raise UsageError(f"--sync must be one of {', '.join(SYNCS)}, got {settings.sync!r}")
    problem = runtimes.problem(settings)  # what the runtime supports: the registry says
    if problem:
        raise UsageError(problem)
    modes = runtimes.get(settings.runtime).network_modes  # where --network applies: the registry says
    if settings.network is not None and settings.network not in modes:
        raise UsageError(f"--network must be one of {', '.join(modes)}, got {settings.network!r}")
    return settings


def _as_engines_run_it(settings: RunSettings) -> RunSettings:
    """The settings the node engines get: wormhole in isolated contention runs each multicast
    apart on shared engines (``experiments/run.py:emulate``)."""
    if settings.switching == "wormhole":
        return replace(settings, contention="shared")
    return settings


def check_nodes(topology: Topology, runtime: str) -> None:
    """A UsageError when ``runtime`` cannot host this many nodes."""
    cap = MAX_NODES.get(runtime)
    n = topology.cols * topology.rows
    if cap is not None and n > cap:
        raise UsageError(f"{topology.spec} has {n} nodes; the {runtime} runtime hosts at most {cap}")


def check_broker(url: str | None, timeout: float = BROKER_PROBE_S) -> None:
    """Parse ``--broker`` and connect to it once (``timeout`` seconds), or a UsageError saying why."""
    if url is None:
        return
    from node.transport.mqtt import parse_broker  # aiomqtt and trio-asyncio: only with a broker

    try:
        addr = parse_broker(url)
    except ValueError as exc:
        raise UsageError(f"--broker: {exc}") from None
    try:
        with socket.create_connection((addr.host, addr.port), timeout=timeout):
            pass
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise UsageError(f"--broker {url}: cannot connect to {addr.host}:{addr.port} ({why})") from None


def settings_from(
    args: argparse.Namespace, topology: Topology | None = None, *, probe_broker: bool = True, **extra: Any
) -> RunSettings:
    """The validated RunSettings of the run options (and the node cap of ``topology``'s runtime).

    With ``probe_broker`` a ``--broker`` of the processes or containers runtime is connected to
    once (3 s) so that an unreachable broker is a usage error before anything starts.
    """
    deployment = getattr(args, "deployment", None)
    if deployment is not None:
        from coordinator.runtimes.deployments import attach_check

        # the deployment's runtime, and a mismatched topology or dead nodes fail here, at once
        dep = attach_check(deployment, topology, probe=True) if topology is not None else None
        if dep is None:
            from coordinator.runtimes.deployments import load

            dep = load(deployment)
        args.runtime, args.broker = dep.runtime, None
        extra = {**extra, "deployment": deployment}
    check_timing_params(args)
    wormhole = getattr(args, "switching", "store-and-forward") == "wormhole"
    ts = getattr(args, "ts", None)
    ts = RunSettings().ts if ts is None else ts
    if wormhole and ts != int(ts):
        raise UsageError(f"--ts must be a whole number of cycles under --switching wormhole, got {ts:g}")
    given = {  # every setting's value as given (an option a command does not offer: its default)
        f.name: getattr(args, f.name)
        for f, meta in settings_of(RunSettings)
        if meta.flag is not None and hasattr(args, f.name) and f.name not in extra
    }
    given |= {"runtime": args.runtime, "network": getattr(args, "network", None)}
    for f, meta in settings_of(RunSettings):  # an unset option not given: its field's default
        if meta.unset and given.get(f.name, 0) is None:
            del given[f.name]
    if wormhole and "contention" not in given:
        given["contention"] = Contention.SHARED
    if "ts" in given:
        given["ts"] = int(ts)
    settings = RunSettings(**given, **extra)
    settings = validate_settings(replace(settings, link_model=link_model_from(settings, topology)))
    if topology is not None:
        check_nodes(topology, settings.runtime)
        why = check_switching(_as_engines_run_it(settings), topology.is_torus)
        if why is not None:
            raise UsageError(f"--switching {settings.switching}: {why}")
        if settings.shards > topology.size:
            raise UsageError(
                f"--shards {settings.shards} is more than the {topology.size} nodes of {topology.spec}"
            )
    if probe_broker and runtimes.get(settings.runtime).needs_broker:
        check_broker(settings.broker)
    elif settings.broker is not None:  # unused by this runtime, but never silently wrong
        from node.transport.mqtt import parse_broker

        try:
            parse_broker(settings.broker)
        except ValueError as exc:
            raise UsageError(f"--broker: {exc}") from None
    return settings
