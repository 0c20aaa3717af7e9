"""PNG plots of a knee run (matplotlib, the ``plot`` extra); rank 0 only."""
from __future__ import annotations

import os

import numpy as np

from .tissues import ID


def plot_all(out: str, run, T: np.ndarray, tid: np.ndarray) -> list[str]:
    """Temperature-vs-time curves and cross-section maps; returns the file names."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ["(matplotlib not installed: pip install pyfw[plot])"]
    files = []
    h = run.history
    t = np.array(h["t"]) / 60.0
    fig, ax = plt.subplots(figsize=(7, 4.5))
    styles = ["-", "--", "-.", ":"]
    for n, k in enumerate(run.points):   # deep points overlap on short runs: vary the dash
        ax.plot(t, h[k], styles[n % len(styles)], lw=1.6, label=k.replace("_", " "))
    ax.set_xlabel("time since the device was applied (min)")
    ax.set_ylabel("temperature (°C)")
    device = f"{run.p.pack} pack" if run.p.device == "gel" else run.p.device
    ax.set_title(f"knee cooling: {device} on {', '.join(run.p.sides)}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    f = os.path.join(out, "history.png")
    fig.tight_layout()
    fig.savefig(f, dpi=110)
    plt.close(fig)
    files.append(f)

    zj, yj, xj = run.points["joint_centre"]
    # the body only: with the pack (0 C) and air on the scale, the anatomy is one colour
    outside = [ID[n] for n in ("air", "insulator", "bandage", "gel", "cuff", "ice")]
    Tm = np.ma.masked_where(np.isin(tid, outside), T)
    lo, hi = np.percentile(Tm.compressed(), [1, 99]) if Tm.count() else (None, None)
    fig, axs = plt.subplots(1, 3, figsize=(15, 4.8))
    d = run.p.dx_mm
    views = [(Tm[zj], "axial plane through the joint (x, y)", "x (mm)", "y (mm)"),
             (Tm[:, :, xj], "sagittal plane (y, z)", "y (mm)", "z (mm)"),
             (Tm[:, yj, :], "coronal plane (x, z)", "x (mm)", "z (mm)")]
    for ax, (img, title, xl, yl) in zip(axs, views):
        im = ax.imshow(img, origin="lower", cmap="coolwarm", vmin=lo, vmax=hi,
                       extent=(0, img.shape[1] * d, 0, img.shape[0] * d))
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(xl)
        ax.set_ylabel(yl)
        fig.colorbar(im, ax=ax, shrink=0.8, label="°C")
    fig.suptitle(f"temperature after {run.solver.time / 60:.0f} min")
    f = os.path.join(out, "sections.png")
    fig.tight_layout()
    fig.savefig(f, dpi=100)
    plt.close(fig)
    files.append(f)
    return files
