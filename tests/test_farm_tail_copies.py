"""Tail copies (rDLB): which idle worker gets a copy of which running chunk, against a
plain reference that evaluates every chunk for every idle worker."""
import math
import random
from collections import deque
from types import SimpleNamespace as NS

from pyfw.farm.recovery import Recovery


def _reference(workers, now):
    """For each idle worker in turn: of the chunks not yet copied, the one expected to
    finish last among those a copy would finish sooner (the rule of
    Recovery.duplicate_tail, written out with no shortcut)."""
    known = sorted(w.stats.mean_recent for w in workers if w.stats.mean_recent is not None)
    typical = known[len(known) // 2] if known else None
    copied, plan = set(), []
    for w in [w for w in workers if not w.inflight]:
        mine_per_task = w.stats.mean_recent or typical
        best, best_left = None, 0.0
        for other in workers:
            mean = other.stats.mean_recent or typical or 0.0
            t = now
            for pos, c in enumerate(other.inflight):
                start = c.t_head if pos == 0 else t
                start = now if start == math.inf else start
                mark = c.t_mark if pos == 0 and c.t_mark != math.inf else start
                end = mark + c.left * mean
                if pos == 0:
                    end = max(end, now + (now - start))
                t = end
                if c.twin is not None or id(c) in copied or c.rnd.cancelled:
                    continue
                left = end - now
                mine = (mine_per_task if mine_per_task is not None else left) * c.left
                if left > mine and left > best_left:
                    best, best_left = c, left
        if best is not None:
            copied.add(id(best))
            plan.append((w.rank, best.cid))
    return plan


def _scene(rng, now):
    rnd = NS(cancelled=False, tail_duplication=True, done=set())
    workers, cid = [], 0
    for rank in range(1, rng.randint(2, 40)):
        w = NS(rank=rank, inflight=deque(),
               stats=NS(mean_recent=rng.choice([None, rng.uniform(0.001, 0.05)])))
        for pos in range(rng.choice([0, 0, 1, 1, 2, 3])):
            n = rng.randint(1, 20)
            t_head = now - rng.uniform(0, 0.5) if pos == 0 else math.inf
            c = NS(cid=cid, rnd=rnd, ids=list(range(cid * 100, cid * 100 + n)), items=[0] * n,
                   rank=rank, t_head=t_head,
                   t_mark=t_head if pos == 0 and rng.random() < 0.5 else math.inf,
                   left=rng.randint(1, n), twin=None, group=None,
                   width=1)
            if pos == 0 and c.t_mark == math.inf:
                c.t_mark = t_head
            w.inflight.append(c)
            cid += 1
        workers.append(w)
    return workers


def test_tail_copies_go_where_the_plain_rule_sends_them():
    rng = random.Random(7)
    for _ in range(300):
        now = 100.0
        workers = _scene(rng, now)
        expected = _reference(workers, now)
        plan = []

        def send(target, rnd, ids, items, t, plan=plan):
            twin = NS(cid=-1, rnd=rnd, ids=ids, items=items, rank=target.rank, t_head=t,
                      t_mark=t, left=len(ids), twin=None, group=None, width=1)
            target.inflight.append(twin)
            return twin

        rec = Recovery(NS(duplicates=0), send)

        def copy(chunk, target, pending, t, rec=rec, plan=plan):
            plan.append((target.rank, chunk.cid))
            return Recovery._copy(rec, chunk, target, pending, t)

        rec._copy = copy
        sent = rec.duplicate_tail(workers, now)
        assert plan == expected
        assert sent == bool(expected)
