"""Helpers of the knee app (not public API)."""
from __future__ import annotations

import json


def params_from_key(key: str):
    """Rebuild :class:`~apps.knee.model.Params` from its JSON key (stored in checkpoints)."""
    from .model import Params
    d = json.loads(key)
    d["shape"], d["sides"] = tuple(d["shape"]), tuple(d["sides"])
    return Params(**d)
