"""pyfw.monitor: measure links and ranks, actively and passively, and forecast them.

Modules (each documents its own API):

* :mod:`~pyfw.monitor.probes` -- active probes, collective over a communicator:
  :func:`probe_pairs` (ping-pong per pair at the study's sizes, rounds of disjoint pairs,
  Hockney fit per link, deadlines), :func:`sweep` (NetPIPE-style), :func:`pingpong`,
  :func:`ring_test`, :func:`allgather_test`.
* :mod:`~pyfw.monitor.profile` -- passive: :func:`profile` (CPU, peak memory, bytes and
  messages per peer, communication pattern), :func:`classify`.
* :mod:`~pyfw.monitor.forecast` -- NWS-style :class:`ForecasterBank`, :class:`LinkForecast`,
  :class:`RankSpeedForecast`.
* :mod:`~pyfw.monitor.online` -- :class:`OnlineMonitor`: cheap probes between steps of an
  SPMD loop under an overhead budget, feeding the forecasts.
* :mod:`~pyfw.monitor.emulate` -- :class:`LinkShaper` (``comm.shaper``: added latency, capped
  bandwidth per link), :class:`Slowdown`, :func:`spin_work`: heterogeneity with known truth.
* :mod:`~pyfw.monitor.report` and ``python -m pyfw.monitor`` -- JSON, tables, PNGs.

For the runtimes (stable API)::

    from pyfw.monitor import LinkForecast, RankSpeedForecast, OnlineMonitor, probe_pairs
    m = probe_pairs(comm)                  # LinkMatrix: m.alpha[i, j] (s), m.bandwidth[i, j]
    mon = OnlineMonitor(comm, budget=0.01) # then mon.step(work, seconds) every step
    mon.link(i, j).time(nbytes); mon.matrices(); mon.speeds()
    dom = SlabDomain(comm, shape, monitor=mon); bal = Balancer(dom)  # one monitor per job:
    # bal.record(compute_s) feeds it and counts its steps; the balancer reads mon.speeds()
"""
import importlib

# Submodules are imported on first use of a name (PEP 562): the farm's scheduler needs only
# the forecasters, and should not pay for the probes, the online monitor and numpy.
_HOME = {
    "emulate": ("LinkShaper", "Slowdown", "hold", "spin", "spin_work"),
    "forecast": ("Forecast", "ForecasterBank", "LinkEstimate", "LinkForecast",
                 "RankSpeedForecast", "default_forecasters"),
    "online": ("OnlineMonitor",),
    "probes": ("STUDY_SIZES", "LinkMatrix", "ProbeTimeout", "allgather_test", "netpipe_sizes",
               "pingpong", "probe_pairs", "ring_test", "round_robin", "sweep"),
    "profile": ("Profiler", "classify", "profile", "write_json"),
    "stats": ("Hockney", "hockney_fit", "summarize"),
}
_WHERE = {name: module for module, names in _HOME.items() for name in names}

__all__ = ["LinkShaper", "Slowdown", "hold", "spin", "spin_work", "Forecast",
           "ForecasterBank", "LinkEstimate", "LinkForecast", "RankSpeedForecast",
           "default_forecasters", "OnlineMonitor", "STUDY_SIZES", "LinkMatrix", "ProbeTimeout",
           "allgather_test", "netpipe_sizes", "pingpong", "probe_pairs", "ring_test",
           "round_robin", "sweep", "Profiler", "classify", "profile", "write_json", "Hockney",
           "hockney_fit", "summarize"]


def __getattr__(name):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    mod = importlib.import_module(f".{module}", __name__)
    for other in _HOME[module]:   # all of them: importing .profile binds the name to the module
        globals()[other] = getattr(mod, other)
    return globals()[name]


def __dir__():
    return sorted(set(globals()) | set(__all__))
