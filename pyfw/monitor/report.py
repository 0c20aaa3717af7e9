"""Terminal tables and PNG plots for saved monitor results (probe, transports, profile JSON).

``python -m pyfw.monitor report FILE [--png PREFIX]`` calls :func:`render`. JSON kinds:

* ``probe`` -- written by ``python -m pyfw.monitor probe``: ``pairs`` (a
  :class:`pyfw.monitor.probes.LinkMatrix` dict), optional ``sweep`` (same shape), ``ring``,
  ``allgather``;
* ``transports`` -- ``runs: {transport: probe dict}`` from ``python -m pyfw.monitor
  transports``;
* ``profile`` -- :func:`pyfw.monitor.profile.profile`.

Plots (matplotlib, Agg backend; skipped with a note if matplotlib is missing):
``PREFIX_latency.png`` / ``PREFIX_bandwidth.png`` heatmaps, ``PREFIX_links.png`` one-way time
and bandwidth against size per link, ``PREFIX_transports.png``, ``PREFIX_traffic.png``.
"""
from __future__ import annotations

import json
import math

import numpy as np

__all__ = ["load", "render", "table", "plot"]


def load(path: str) -> dict:
    """Read a probe, transports or profile JSON."""
    with open(path) as f:
        return json.load(f)


def _nan(x):
    if x is None:
        return math.nan
    if isinstance(x, list):
        return [_nan(v) for v in x]
    return x


def _us(s) -> str:
    return "-" if s is None or not math.isfinite(s) else f"{s * 1e6:9.2f}"


def _mbs(b) -> str:
    return "-" if b is None or not math.isfinite(b) else f"{b / 1e6:10.1f}"


def _pairs_table(d: dict, title: str) -> list[str]:
    t = np.array(_nan(d["time"]), dtype=float)
    alpha = np.array(_nan(d["alpha"]), dtype=float)
    bw = np.array(_nan(d["bandwidth"]), dtype=float)
    raw = np.array(_nan(d["raw"]), dtype=float)
    sizes = d["sizes"]
    p = t.shape[0]
    lines = [f"{title}: one-way time (us) per size, method={d['method']}, reps={d['reps']}, "
             f"iters={d['iters']}; Hockney alpha (us) and bandwidth (MB/s)"]
    show = sizes if len(sizes) <= 8 else [sizes[0], *sizes[len(sizes) // 4::len(sizes) // 4]]
    show = list(dict.fromkeys(show))
    lines.append("link   " + "".join(f"{s:>10d}" for s in show) + "   alpha(us)   bw(MB/s)"
                 "   spread@small(us)")
    for i in range(p):
        for j in range(i + 1, p):
            if not np.isfinite(t[i, j]).any():
                continue
            cells = "".join(f"{_us(t[i, j, sizes.index(s)]):>10}" for s in show)
            r = raw[i, j, 0]
            spread = f"{np.nanmin(r) * 1e6:.2f}-{np.nanmax(r) * 1e6:.2f}"
            lines.append(f"{i:>2}-{j:<3} {cells}  {_us(alpha[i, j]):>10} {_mbs(bw[i, j]):>10}"
                         f"   {spread}")
    return lines


def _coll_table(d: dict, title: str) -> list[str]:
    lines = [f"{title} (method={d['method']}): size, slowest rank's time (us)"
             + (", bandwidth per rank (MB/s)" if "bandwidth" in d else "")]
    for k, s in enumerate(d["sizes"]):
        extra = f"  {_mbs(d['bandwidth'][k])}" if "bandwidth" in d else ""
        lines.append(f"  {s:>9d} B  {_us(d['max'][k])}{extra}")
    return lines


def _profile_table(d: dict) -> list[str]:
    pat = d["pattern"]
    extra = f" hub={pat['hub']}" if pat.get("hub") is not None else ""
    extra += f" order={pat['order']}" if pat.get("order") else ""
    lines = [f"profile of {d['size']} ranks: pattern = {pat['pattern']}{extra}",
             "rank  host            wall(s)   cpu(s)  cpu_util  peak_rss(MiB)  sent(MB)  msgs"]
    b, m = np.array(d["bytes"]), np.array(d["msgs"])
    for r in d["ranks"]:
        k = r["rank"]
        lines.append(f"{k:>4}  {str(r['host'])[:14]:<14} {r['wall_s']:8.2f} {r['cpu_s']:8.2f}"
                     f"  {r['cpu_util']:8.2f}  {r['peak_rss_bytes'] / 2**20:13.1f}"
                     f"  {b[k].sum() / 1e6:8.3f}  {m[k].sum():>5}")
    lines.append("bytes sent (row -> column):")
    for k in range(d["size"]):
        lines.append(f"  {k:>3}: " + " ".join(f"{v:>10d}" for v in b[k]))
    return lines


def table(data: dict) -> str:
    """The terminal table of a result dict (any kind)."""
    kind = data.get("kind")
    lines = []
    if kind == "pairs":
        lines += _pairs_table(data, "pairs")
    elif kind == "probe":
        hdr = f"probe of {data.get('size')} ranks on {data.get('host', '?')}"
        if data.get("emulated"):
            hdr += f"; emulated links: {data['emulated']}"
        lines.append(hdr)
        for key in ("pairs", "sweep"):
            if data.get(key):
                lines += _pairs_table(data[key], key)
        for key in ("ring", "allgather"):
            if data.get(key):
                lines += _coll_table(data[key], key)
    elif kind == "transports":
        for name, run in data["runs"].items():
            lines.append(f"=== transport {name}: env {run.get('env', {})}")
            lines += table(run).splitlines()
    elif kind == "profile":
        lines += _profile_table(data)
    else:
        raise ValueError(f"unknown result kind {kind!r}")
    return "\n".join(lines)


def _plt():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        return None


def _heat(plt, m, title, path, fmt, scale):
    fig, ax = plt.subplots(figsize=(4.5, 3.8))
    im = ax.imshow(m * scale, cmap="viridis")
    fig.colorbar(im, ax=ax)
    for (i, j), v in np.ndenumerate(m):
        if np.isfinite(v):
            ax.text(j, i, fmt.format(v * scale), ha="center", va="center", color="w",
                    fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("rank")
    ax.set_ylabel("rank")
    from matplotlib.ticker import MaxNLocator
    for axis in (ax.xaxis, ax.yaxis):  # ranks are whole numbers
        axis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


_MARKERS = "o^sDv<>ph*"
_LINES = ("-", "--", ":", "-.")


def _style(k: int, n: int) -> dict:
    """Series ``k`` of ``n``: its own colour while the palette (10) lasts, then the colours
    come round again with another marker and dash, so no two series look alike."""
    lap = k // 10
    return {"color": f"C{k % 10}", "marker": _MARKERS[lap % len(_MARKERS)] if n > 10 else ".",
            "linestyle": _LINES[lap % len(_LINES)], "markersize": 4}


def _curves(plt, series, path, title):
    """series: list of (label, sizes, one-way times)."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for k, (label, sizes, t) in enumerate(series):
        s, t = np.asarray(sizes, float), np.asarray(t, float)
        style = _style(k, len(series))
        a1.loglog(s, t * 1e6, label=label, **style)
        a2.semilogx(s, s / t / 1e6, label=label, **style)
    a1.set_xlabel("message size (B)")
    a1.set_ylabel("one-way time (us)")
    a2.set_xlabel("message size (B)")
    a2.set_ylabel("bandwidth (MB/s)")
    # beside the plots, not over the curves (a pair matrix has many links)
    a2.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0,
              ncol=1 + len(series) // 16)
    a1.grid(True, which="both", alpha=0.3)
    a2.grid(True, which="both", alpha=0.3)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def _link_series(d, prefix=""):
    t = np.array(_nan(d["time"]), dtype=float)
    out = []
    for i in range(t.shape[0]):
        for j in range(i + 1, t.shape[0]):
            if np.isfinite(t[i, j]).any():
                out.append((f"{prefix}{i}-{j}", d["sizes"], t[i, j]))
    return out


def plot(data: dict, prefix: str) -> list[str]:
    """Write the PNGs for ``data`` with file names starting with ``prefix``; returns paths."""
    plt = _plt()
    if plt is None:
        return []
    kind, paths = data.get("kind"), []
    if kind in ("pairs", "probe"):
        main = data if kind == "pairs" else (data.get("pairs") or data.get("sweep"))
        if main:
            t = np.array(_nan(main["time"]), dtype=float)[:, :, 0]
            bw = np.array(_nan(main["bandwidth"]), dtype=float)
            paths.append(_heat(plt, t, f"one-way time at {main['sizes'][0]} B (us)",
                               f"{prefix}_latency.png", "{:.1f}", 1e6))
            paths.append(_heat(plt, bw, "Hockney bandwidth (MB/s)",
                               f"{prefix}_bandwidth.png", "{:.0f}", 1e-6))
        series = []
        for key in ("pairs", "sweep") if kind == "probe" else (None,):
            d = data if key is None else data.get(key)
            if d:
                series += _link_series(d, "" if key is None else f"{key} ")
        if series:
            paths.append(_curves(plt, series, f"{prefix}_links.png", "per-link ping-pong"))
    elif kind == "transports":
        series = []
        for name, run in data["runs"].items():
            d = run.get("sweep") or run.get("pairs")
            if d:
                series += _link_series(d, f"{name} ")
        paths.append(_curves(plt, series, f"{prefix}_transports.png",
                             "ping-pong per Open MPI transport"))
    elif kind == "profile":
        b = np.array(data["bytes"], dtype=float)
        paths.append(_heat(plt, b, f"bytes sent row->col; pattern "
                                   f"{data['pattern']['pattern']}",
                           f"{prefix}_traffic.png", "{:.2g}", 1.0))
    return paths


def render(data: dict, png_prefix: str | None = None) -> str:
    """Table text, plus PNGs when ``png_prefix`` is given (their paths appended)."""
    text = table(data)
    if png_prefix:
        paths = plot(data, png_prefix)
        text += "\n" + ("\n".join(f"wrote {p}" for p in paths) if paths
                        else "(matplotlib not installed: no PNG)")
    return text
