"""Rubik per-core speed against vcube, a C++ optimal solver, on this machine: the same cubes,
tables of the same kind and size, one thread each, side by side in one run.

    python benchmarks/rubik_vcube.py --vcube /path/to/vc-optimal             # Cube.random(0..19)
    python benchmarks/rubik_vcube.py --vcube ... --seeds 0-3 --repeats 1     # a short run

vcube (https://github.com/Voltara/vcube, GPL-3, Voltara's rewrite of nxopt's ideas with
AVX2) is the peer the issue's per-core goal names; it is not part of pyfw and not installed
with it. Build it once, for example with the clang that ``pip install ziglang`` brings (its
CMakeLists asks for clang; g++ 13 rejects one of its constexprs)::

    git clone https://github.com/Voltara/vcube && cd vcube
    python -m ziglang c++ -O3 -mlzcnt -mbmi -mbmi2 -mavx2 -flax-vector-conversions \\
        -std=c++17 -DNDEBUG -o vc-optimal src/vc-optimal.cpp src/alloc.cpp src/cube.cpp \\
        src/nxprune.cpp src/nxsolve.cpp src/util.cpp -lpthread
    ./vc-optimal -c 112 --no-input        # its 112 table, 2.42 GiB, beside the binary

Its table "112" is nxopt's coordinate as ours is (``--heuristic nx``: phase-1 flip x UD
slice x twist x the corners' U/D separation, 16 symmetries, 2 bits an entry, the three
axes): 2.42 GiB against our 2.47 GB. Each round runs both on the same cubes, alternating
which goes first:

* ours: ``python -m pyfw.apps.rubik --file F --json --heuristic nx --table-memory private``,
  one process;
* vcube: ``vc-optimal -c 112 -w 1 --ordered --format reid``, the same positions in Reid's
  notation.

Per cube: each solver's own solve time (tables loaded and a first, uncounted cube solved
before the clock), the lengths (both solvers are optimal, so they must agree: a
disagreement stops the run), vcube's solution applied to our cube model (it must solve
it), our nodes. Reported: per-cube medians over the rounds, ours / vcube per cube
(geometric mean, min, max), the mean solve time of each (the issue's goal is our serial
mean), and the whole commands' wall times.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

from pyfw.monitor.results import add_output_options, output_dir, write_json

#: Reid's notation: the stickers of each slot, read face by face in the slot's name order
#: (edges UF UR UB UL DF DR DB DL FR FL BR BL, corners UFR URB UBL ULF DRF DFL DLB DBR),
#: as facelet names of the URFDLB string (U1..U9 R1..R9 F1..F9 D1..D9 L1..L9 B1..B9)
REID_SLOTS = (
    ("U8", "F2"), ("U6", "R2"), ("U2", "B2"), ("U4", "L2"),
    ("D2", "F8"), ("D6", "R8"), ("D8", "B8"), ("D4", "L8"),
    ("F6", "R4"), ("F4", "L6"), ("B4", "R6"), ("B6", "L4"),
    ("U9", "F3", "R1"), ("U3", "R3", "B1"), ("U1", "B3", "L1"), ("U7", "L3", "F1"),
    ("D3", "R7", "F9"), ("D1", "F7", "L9"), ("D7", "L7", "B9"), ("D9", "B7", "R9"))


#: a 12-move scramble, solved first by both solvers and not counted
WARM_UP = "R U2 F' L D B2 U' R2 F D' L2 B"


def reid(facelets):
    """Reid's notation of a facelet string in face letters (``Cube.facelets()``)."""
    def sticker(name):
        return facelets["URFDLB".index(name[0]) * 9 + int(name[1]) - 1]
    return " ".join("".join(sticker(n) for n in slot) for slot in REID_SLOTS)


#: vcube's 112 table in bytes: it maps it in 1 GB or 2 MB hugetlb pages where enough are
#: reserved, else in 4 KB pages (ours asks for transparent 2 MB pages for its private copy)
VCUBE_TABLE_BYTES = 2_603_089_920


def hugetlb_pages():
    """(free hugetlb pages of the default size, that size in bytes) from /proc/meminfo."""
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, value = line.partition(":")
            info[key] = int(value.split()[0])
    return info.get("HugePages_Free", 0), info.get("Hugepagesize", 0) * 1024


def _seeds(text):
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def _ours(path, timeout):
    """Our solves of the facelet file: {line: (length, search seconds, generated nodes,
    expanded nodes)}, wall."""
    cmd = [sys.executable, "-m", "pyfw.apps.rubik", "--heuristic", "nx", "--table-memory",
           "private", "--json", "--file", path]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    rows = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    cubes = [r for r in rows if "length" in r]
    assert all(r["verified"] for r in cubes)
    # busy_seconds: the time inside the cube's own search tasks (a batch interleaves its
    # cubes, so a cube's wall time from start to end counts others' turns too)
    return {r["line"]: (r["length"], r["busy_seconds"], r["generated"], r["expanded"])
            for r in cubes}, wall


def _vcube(binary, path, facelets, timeout):
    """vcube's solves of the Reid file: {line: (length, seconds, None, None)}, wall; each
    solution is checked on our cube model (no node counts: vcube does not print them)."""
    from pyfw.apps.rubik import Cube
    cmd = [binary, "-c", "112", "-w", "1", "--ordered", "--format", "reid"]
    t0 = time.perf_counter()
    with open(path) as f:
        p = subprocess.run(cmd, stdin=f, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    out = {}
    for line in p.stdout.splitlines():
        ident, seconds, length, *moves = line.split()
        line_no = int(ident) + 1
        cube = Cube.from_facelets(facelets[line_no - 1]).apply(" ".join(moves))
        if not cube.is_solved:
            raise RuntimeError(f"vcube's solution of line {line_no} does not solve our cube: "
                               f"the two notations disagree ({' '.join(moves)})")
        out[line_no] = (int(length), float(seconds), None, None)
    if len(out) != len(facelets):
        raise RuntimeError(f"vcube solved {len(out)} of {len(facelets)} cubes:\n{p.stderr}")
    return out, wall


def _summary(per_cube):
    """Means and medians of per-cube median seconds."""
    secs = [statistics.median(v) for v in per_cube.values()]
    return {"mean_seconds": statistics.fmean(secs), "median_seconds": statistics.median(secs),
            "total_seconds": sum(secs)}


def measure(binary, seeds, repeats, timeout):
    from pyfw.apps.rubik import Cube
    # line 1 warms both solvers up (tables paged in, code compiled) and is not counted
    facelets = [Cube.from_moves(WARM_UP).facelets()] + [Cube.random(s).facelets()
                                                        for s in seeds]
    runs = {"ours": [], "vcube": []}
    with tempfile.TemporaryDirectory(prefix="rubik-vcube-") as tmp:
        fpath, rpath = os.path.join(tmp, "cubes.txt"), os.path.join(tmp, "cubes.reid")
        with open(fpath, "w") as f:
            f.write("\n".join(facelets) + "\n")
        with open(rpath, "w") as f:
            f.write("\n".join(reid(x) for x in facelets) + "\n")
        for r in range(repeats):
            for who in ("ours", "vcube") if r % 2 == 0 else ("vcube", "ours"):
                if who == "ours":
                    res, wall = _ours(fpath, timeout)
                else:
                    res, wall = _vcube(binary, rpath, facelets, timeout)
                runs[who].append({"wall": wall, "cubes": res})
                print(f"round {r + 1}, {who}: {len(res)} cubes in {wall:.1f} s (whole "
                      f"command), solves {sum(v[1] for v in res.values()):.1f} s", flush=True)
    per_cube = []
    for i, seed in enumerate(seeds):
        line = i + 2
        ours = [run["cubes"][line] for run in runs["ours"]]
        theirs = [run["cubes"][line] for run in runs["vcube"]]
        lengths = {x[0] for x in ours} | {x[0] for x in theirs}
        if len(lengths) != 1:
            raise RuntimeError(f"Cube.random({seed}): lengths disagree: ours "
                               f"{[x[0] for x in ours]}, vcube {[x[0] for x in theirs]}")
        o = statistics.median(x[1] for x in ours)
        v = statistics.median(x[1] for x in theirs)
        per_cube.append({"seed": seed, "length": lengths.pop(),
                         "ours_seconds": [x[1] for x in ours],
                         "vcube_seconds": [x[1] for x in theirs],
                         "ours_generated": ours[0][2], "ours_expanded": ours[0][3],
                         "ratio": o / v})
    ratios = [c["ratio"] for c in per_cube]
    out = {"per_cube": per_cube,
           "ours": _summary({c["seed"]: c["ours_seconds"] for c in per_cube}),
           "vcube": _summary({c["seed"]: c["vcube_seconds"] for c in per_cube}),
           "ratio_geomean": math.exp(statistics.fmean(math.log(x) for x in ratios)),
           "ratio_min": min(ratios), "ratio_max": max(ratios),
           "ours_wall": [run["wall"] for run in runs["ours"]],
           "vcube_wall": [run["wall"] for run in runs["vcube"]]}
    out["ratio_of_means"] = out["ours"]["mean_seconds"] / out["vcube"]["mean_seconds"]
    for n in sorted({c["length"] for c in per_cube}):
        sel = [c for c in per_cube if c["length"] == n]
        out[f"mean_seconds_{n}_movers"] = {
            "cubes": len(sel),
            "ours": statistics.fmean(statistics.median(c["ours_seconds"]) for c in sel),
            "vcube": statistics.fmean(statistics.median(c["vcube_seconds"]) for c in sel)}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vcube", required=True, help="the vc-optimal binary (its 112 table "
                    "beside it, or generated there on first use)")
    ap.add_argument("--seeds", default="0-19", help="Cube.random(seed) for these (default 0-19)")
    ap.add_argument("--repeats", type=int, default=2, help="rounds of both (default 2)")
    ap.add_argument("--timeout", type=float, default=7200.0, help="per command, seconds")
    ap.add_argument("--note", default="", help="how vcube was built (commit, compiler), "
                    "written into the results")
    add_output_options(ap, os.path.join(HERE, "results"))
    a = ap.parse_args(argv)
    seeds = _seeds(a.seeds)
    free, size = hugetlb_pages()
    vcube_pages = f"{size >> 20} MB" if size and free * size >= VCUBE_TABLE_BYTES else "4 KB"
    if vcube_pages == "4 KB":
        print(f"warning: {free} free hugetlb pages: vcube will map its table in 4 KB pages and "
              f"lose to page walks what ours does not (ours asks for 2 MB pages); reserve them "
              f"first, as root: echo {VCUBE_TABLE_BYTES // (2 << 20) + 50} > "
              f"/proc/sys/vm/nr_hugepages (and 0 afterwards)", file=sys.stderr)
    res = measure(os.path.abspath(a.vcube), seeds, a.repeats, a.timeout)
    print(f"mean solve: ours {res['ours']['mean_seconds']:.2f} s, vcube "
          f"{res['vcube']['mean_seconds']:.2f} s ({res['ratio_of_means']:.2f}x); per cube "
          f"ours / vcube: geometric mean {res['ratio_geomean']:.2f}, "
          f"{res['ratio_min']:.2f}-{res['ratio_max']:.2f}")
    data = {"machine": {"date": time.strftime("%Y-%m-%d %H:%M"), "cores": os.cpu_count()},
            "note": a.note, "workers": 1, "seeds": a.seeds, "repeats": a.repeats,
            "vcube_table": f"112 (2.42 GiB, {vcube_pages} pages)",
            "ours_table": "nx (2.47 GB, transparent 2 MB pages)", "results": res}
    write_json(output_dir(a), "rubik_vcube.json", data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
