"""``python -m pyfw.monitor``: probe links, compare transports, view saved results.

Sub-commands::

    pyfw-run -n 4 -- python -m pyfw.monitor probe [--sweep] [--ring] [--allgather]
        [--sizes 80,320,...] [--reps 8] [--method study|median|min] [--timeout S]
        [--emulate "0-1:2e-3:20e6" ...] [-o probe.json] [--png PREFIX]
    python -m pyfw.monitor transports -n 2 [--transports sm,tcp] [--max-bytes N]
        [-o transports.json] [--png PREFIX]          # launches one mpiexec job per transport
    python -m pyfw.monitor report FILE.json [--png PREFIX]   # probe, transports or profile

``--emulate I-J:LATENCY[:BANDWIDTH]`` slows link I-J with :class:`pyfw.monitor.LinkShaper`
(seconds, bytes/s) and records the ground truth in the JSON. Rank 0 prints and writes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

#: Open MPI settings selecting one transport for point-to-point traffic (ob1 PML + one BTL)
TRANSPORTS = {
    "sm": {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,sm"},
    "tcp": {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl": "self,tcp",
            "OMPI_MCA_btl_tcp_if_include": "lo"},
    "default": {},
}


def _probe(args) -> int:
    from mpi4py import MPI

    from ..comm import Comm
    from .emulate import LinkShaper, parse_links
    from .probes import STUDY_SIZES, allgather_test, probe_pairs, ring_test, sweep
    from .profile import write_json
    from .report import render

    comm = Comm(MPI.COMM_WORLD.Dup())
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else list(STUDY_SIZES)
    lat, bw = parse_links(",".join(args.emulate or []))  # clear error on a bad spec
    emulated = None
    if lat or bw:
        LinkShaper.for_comm(comm, latency=lat, bandwidth=bw)
        emulated = {f"{i}-{j}": {"latency_s": lat.get((i, j), 0.0),
                                 "bandwidth_Bps": bw.get((i, j))}
                    for (i, j) in sorted(set(lat) | set(bw))}
    kw = dict(reps=args.reps, method=args.method, timeout=args.timeout)
    out = {"kind": "probe", "size": comm.size, "host": comm.host, "emulated": emulated,
           "env": {k: v for k, v in os.environ.items() if k.startswith("OMPI_MCA_")
                   and k != "OMPI_MCA_mpi_yield_when_idle"}}
    if not args.no_pairs:
        out["pairs"] = probe_pairs(comm, sizes, iters=args.iters, **kw).to_dict()
    if args.sweep:
        out["sweep"] = sweep(comm, max_bytes=args.max_bytes, **kw).to_dict()
    if args.ring:
        out["ring"] = ring_test(comm, sizes, **kw)
    if args.allgather:
        out["allgather"] = allgather_test(comm, sizes, **kw)
    if comm.rank == 0:
        if args.output:
            write_json(args.output, out)
        print(render(out, args.png))
        if args.output:
            print(f"wrote {args.output}")
    comm.free()
    return 0


def _transports(args) -> int:
    from ..launch import run
    from .profile import write_json
    from .report import render

    names = args.transports.split(",")
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            if name not in TRANSPORTS:
                print(f"unknown transport {name!r}; known: {sorted(TRANSPORTS)}",
                      file=sys.stderr)
                return 2
            path = os.path.join(tmp, f"{name}.json")
            env = dict(os.environ, **TRANSPORTS[name])
            cmd = [sys.executable, "-m", "pyfw.monitor", "probe", "--sweep", "--no-pairs",
                   "--max-bytes", str(args.max_bytes), "--reps", str(args.reps),
                   "--method", args.method, "-o", path]
            res = run(args.nprocs, cmd, timeout=args.timeout, env=env, capture=True)
            if res.returncode != 0 or not os.path.exists(path):
                print(f"transport {name}: job failed (exit {res.returncode})\n"
                      f"{(res.stderr or '')[-2000:]}", file=sys.stderr)
                runs[name] = {"kind": "probe", "error": res.returncode,
                              "env": TRANSPORTS[name]}
                continue
            with open(path) as f:
                runs[name] = json.load(f)
            runs[name]["env"] = TRANSPORTS[name]
    out = {"kind": "transports", "nprocs": args.nprocs, "runs": runs}
    if args.output:
        write_json(args.output, out)
    print(render(out, args.png))
    return 0 if all("error" not in r for r in runs.values()) else 1


def _report(args) -> int:
    from .report import load, render
    print(render(load(args.file), args.png))
    return 0


def _common(p, timeout: float, what: str) -> None:
    p.add_argument("--reps", type=int, default=8,
                   help="repetitions of each measurement (default: %(default)s)")
    p.add_argument("--method", default="study", choices=["study", "median", "min", "mean"],
                   help="summary of the repetitions: study = drop the 2 slowest and average "
                        "the rest, min = best case (NetPIPE), median, mean "
                        "(default: %(default)s)")
    p.add_argument("--timeout", type=float, default=timeout, metavar="SECONDS",
                   help=f"longest wait for {what} (default: %(default)s)")


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m pyfw.monitor`` command line."""
    ap = argparse.ArgumentParser(prog="python -m pyfw.monitor",
                                 description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("probe", help="probe every pair (run under pyfw-run / mpiexec)",
                       description="Ping-pong every pair of ranks (and optionally more "
                       "tests); rank 0 prints a table. Run under MPI: pyfw-run -n 4 -- "
                       "python -m pyfw.monitor probe")
    p.add_argument("--sizes", default=None, metavar="LIST",
                   help="comma-separated message sizes in bytes (default: 80,320,640,16384,"
                        "65536)")
    _common(p, timeout=10.0, what="one answer from a probe partner")
    p.add_argument("--iters", type=int, default=1,
                   help="round trips per repetition (default: %(default)s)")
    p.add_argument("--sweep", action="store_true",
                   help="add a NetPIPE-style sweep of every pair up to --max-bytes")
    p.add_argument("--max-bytes", type=int, default=1 << 20,
                   help="largest sweep size in bytes (default: %(default)s)")
    p.add_argument("--no-pairs", action="store_true", help="skip the study-size matrix")
    p.add_argument("--ring", action="store_true",
                   help="add a bidirectional ring test (every rank to both neighbours)")
    p.add_argument("--allgather", action="store_true",
                   help="add a native all-gather test (MPI_Iallgather per size)")
    p.add_argument("--emulate", action="append", metavar="I-J:LATENCY_S[:BANDWIDTH_BPS]",
                   help="slow link I-J by this latency (s) and bandwidth (B/s), recorded as "
                        "ground truth in the JSON (repeatable)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the results as JSON")
    p.add_argument("--png", metavar="PREFIX", help="write PNGs with this path prefix")
    t = sub.add_parser("transports", help="sweep per Open MPI transport (launches jobs)")
    t.add_argument("-n", "--nprocs", type=int, default=2,
                   help="ranks per job (default: %(default)s)")
    t.add_argument("--transports", default="sm,tcp", metavar="LIST",
                   help=f"comma-separated, of {', '.join(TRANSPORTS)} (default: %(default)s)")
    t.add_argument("--max-bytes", type=int, default=1 << 20,
                   help="largest sweep size in bytes (default: %(default)s)")
    _common(t, timeout=300.0, what="each transport's job (killed after it)")
    t.add_argument("-o", "--output", metavar="FILE", help="write the results as JSON")
    t.add_argument("--png", metavar="PREFIX", help="write PNGs with this path prefix")
    r = sub.add_parser("report", help="view a saved probe/transports/profile JSON")
    r.add_argument("file", help="a JSON written by probe, transports or a profile")
    r.add_argument("--png", metavar="PREFIX", help="write PNGs with this path prefix")
    return ap


def main(argv=None) -> int:
    """``python -m pyfw.monitor probe|transports|report``; returns the exit status."""
    ap = build_parser()
    args = ap.parse_args(argv)
    return {"probe": _probe, "transports": _transports, "report": _report}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
