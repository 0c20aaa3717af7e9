"""The iterator that ``Executor.map`` returns (private): results in order or as they come,
each task's exception raised at its own position, one deadline for the whole map."""
from __future__ import annotations

import time
from concurrent.futures import TimeoutError as FuturesTimeout

from ..farm.ordering import InOrder
from ._pool import initializer_broke
from ._remote import is_initializer_failure, user_exception

__all__ = ["results"]


class _Failed:
    """Stands in the result stream where a task raised."""

    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error


def _values(job, batch):
    """The batch's values, failures replaced by :class:`_Failed`; None if none failed."""
    if not batch.errors:
        return None
    values = list(batch.values)
    for pos, err in batch.errors.items():
        if is_initializer_failure(err):
            values[pos] = _Failed(initializer_broke(job, err))
        else:
            values[pos] = _Failed(user_exception(err))
    return values


def _next_batches(job, deadline):
    """Wait for results (up to the deadline); (batches, finished, error)."""
    with job.cond:
        while not job.batches and not job.finished:
            if deadline is None:
                job.cond.wait(1.0)
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                raise FuturesTimeout()
            job.cond.wait(left)
        got = list(job.batches)
        job.batches.clear()
        return got, job.finished, job.error


def results(job, unordered, deadline):
    """Generator over ``job``'s results (see the module docstring); leaving it early (an
    exception, ``break``, garbage collection) cancels the tasks not yet started."""
    order = InOrder()
    failed = False
    try:
        while True:
            batches, finished, error = _next_batches(job, deadline)
            for batch in batches:
                values = _values(job, batch)
                if values is not None:
                    failed = True
                else:
                    values = batch.values
                stream = values if unordered else order.feed(batch.ids, values)
                if not failed:
                    yield from stream
                else:
                    for value in stream:
                        if type(value) is _Failed:
                            raise value.error
                        yield value
                job.ack = order.next
            if finished and not job.batches:
                if error is not None:
                    raise error
                return
    finally:
        if not job.finished:
            job.abandoned = True
