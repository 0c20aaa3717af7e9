"""Results back in task order (shared by :mod:`pyfw.farm` and :mod:`pyfw.futures`).

Workers answer in any order; an ordered map hands values out in task order, holding at most
a *window* of results that wait for an earlier one: dispatch runs no further than
``window`` tasks past the last value handed out, which bounds the master's memory on huge or
lazy task streams.
"""
from __future__ import annotations

from typing import Any, Iterator

__all__ = ["InOrder", "DEFAULT_WINDOW", "with_errors"]

#: results an ordered map may hold waiting for an earlier one (``Farm.map(window=...)``)
DEFAULT_WINDOW = 65536


class InOrder:
    """Turns result records that arrive in any order into values in task order."""

    def __init__(self):
        self.pending: dict[int, Any] = {}
        self.next = 0   # the id of the next value to hand out

    def feed(self, ids, values) -> Iterator:
        """Values that can be handed out now that ``ids``/``values`` have arrived."""
        nxt = self.next
        if ids[0] == nxt and not self.pending and ids[-1] - nxt == len(ids) - 1:
            self.next = nxt + len(values)
            yield from values  # the usual case: the next consecutive block
            return
        pending = self.pending
        pending.update(zip(ids, values))
        while nxt in pending:
            self.next = nxt + 1
            yield pending.pop(nxt)
            nxt += 1


def with_errors(values, errors: dict | None, replace=lambda err: err) -> list:
    """``values`` with ``replace(error)`` at each failed position of ``errors``
    ({position: error}); ``values`` itself when nothing failed."""
    if not errors:
        return values
    values = list(values)
    for pos, err in errors.items():
        values[pos] = replace(err)
    return values
