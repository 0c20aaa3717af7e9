"""The uncertainty band the knee CLI prints for its default scenario, read from
the sensitivity study's package file, ``sensitivity.json``, which
``python -m apps.knee.studies sensitivity --publish`` builds."""
from __future__ import annotations

import json
import os

from .model import Params

__all__ = ["SENSITIVITY", "sensitivity_band"]

SENSITIVITY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sensitivity.json")


def sensitivity_band(p, summ) -> dict | None:
    """The drop of the default scenario with the band of the sensitivity study
    (its low/high ends as fractions of its own drop, applied to this run's), or None for
    another scenario or without the study's file."""
    if not os.path.exists(SENSITIVITY):
        return None
    ref = Params()
    same = ("device", "sides", "thickness_mm", "length_mm", "bandage_mm", "pack",
            "perfusion_lag", "perfusion_recovery", "pack_temp", "t_arterial", "ambient",
            "h_air", "overrides", "arthroscopy_min", "tourniquet", "subcutis_mm",
            "device_at_mm", "pouch_mm", "device_on_min", "device_off_min")
    if any(getattr(p, k) != getattr(ref, k) for k in same):
        return None
    with open(SENSITIVITY) as fh:
        study = json.load(fh)
    point, drops = study["point"], {}
    for m, (lo, hi) in study["band"].items():
        got = summ["drop"].get(int(m), summ["drop"].get(m))
        base = study["base"][m]
        if got is None or base <= 0:
            continue
        d = got[point]
        drops[m] = (d, d * lo / base, d * hi / base)
    return {"point": point, "drops": drops, "study_grid": study["grid"],
            "method": "one parameter at a time over its range, quadrature sum"}
