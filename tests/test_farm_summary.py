"""The end-of-run summary (``Farm(summary=True)``, :func:`pyfw.farm.progress.format_summary`):
its rows add up to the runs its header states, a two-level farm's rows say each rank's role,
and a resumed run says how many results came from its journal (newcomer finding 10)."""
import re

from mpi4py import MPI

from pyfw import Farm
from pyfw.farm.progress import format_summary


def _row(rank, tasks, **extra):
    return dict({"rank": rank, "host": "h", "alive": True, "tasks": tasks, "chunks": 1,
                 "busy_s": 0.5, "idle_s": 0.1, "bytes_to": 10, "bytes_from": 20}, **extra)


def _table(text):
    """(header, [(rank, role, tasks), ...]) of a summary."""
    head, columns, *rows = text.split("\n")
    assert columns.split()[:5] == ["rank", "host", "role", "alive", "tasks"]
    return head, [(int(r.split()[0]), r.split()[2], int(r.split()[4])) for r in rows]


def _stats(workers, tasks, **extra):
    executions = sum(w["computed_tasks"] if w.get("role") == "submaster" else w["tasks"]
                     for w in workers)    # as Farm.stats counts them
    return dict({"tasks": tasks, "elapsed_s": 1.0, "duplicates": 0, "quarantined": [],
                 "failures": 0, "executions": executions, "workers": workers}, **extra)


def test_two_level_rows_add_up_and_name_their_role():
    # finding 10: the header said 3,000 tasks, the rows summed to 4,474 (each sub-master's
    # row held its node's tasks)
    workers = [_row(1, 1000), _row(2, 1474, role="submaster", computed_tasks=474,
                                   computed_busy_s=0.2),
               _row(3, 800, via=2), _row(4, 200, via=2), _row(5, 526)]
    head, rows = _table(format_summary(_stats(workers, 3000)))
    assert [(r, role) for r, role, _ in rows] == [(1, "worker"), (2, "sub-master"),
                                                  (3, "via:2"), (4, "via:2"), (5, "worker")]
    assert sum(n for _, _, n in rows) == 3000
    assert head.startswith("pyfw farm: 3,000 tasks in 1.000 s on 5 worker(s); the rows "
                           "count 3,000 task runs; 0 quarantined")


def test_a_duplicate_run_is_told_apart_from_tasks():
    # finding 10: a flat run's header said 5,269 while its rows summed to 5,270 (a straggler
    # copy ran to the end; its result was dropped as a duplicate)
    stats = _stats([_row(1, 2635), _row(2, 2635)], 5269, duplicates=1)
    head, rows = _table(format_summary(stats))
    assert sum(n for _, _, n in rows) == 5270
    assert "5,269 tasks" in head and "the rows count 5,270 task runs, 1 more: copies from " \
        "1 duplicate chunk(s)" in head


def test_a_resumed_run_says_what_came_from_the_journal(tmp_path):
    journal = str(tmp_path / "j.h5")
    for run in range(2):
        with Farm(MPI.COMM_SELF, journal=journal) as farm:
            assert list(farm.map(abs, range(-20, 0))) == list(range(20, 0, -1))
            stats = farm.stats()
        text = format_summary(stats)
        head, rows = _table(text)
        if run == 0:
            assert stats["from_journal"] == 0 and stats["tasks"] == 20
            assert "journal" not in head and sum(n for _, _, n in rows) == 20
        else:   # every result read back, none run again
            assert stats["from_journal"] == 20 and stats["tasks"] == 0
            assert re.match(r"pyfw farm: 0 tasks in [\d.]+ s on 1 worker\(s\) and 20 results "
                            r"from the journal \(not run again\)", head), head
            assert sum(n for _, _, n in rows) == 0
