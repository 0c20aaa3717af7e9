"""Wire format of the master-worker runtime (private).

All messages are pickled tuples sent through :class:`pyfw.comm.Comm` on the farm's own
duplicated communicator; tags are fixed, identifiers ride in the payload.

master -> worker, tag WORK:
    (cid, rid, ids, payload)            a chunk; ``ids`` a range or list, ``payload`` the
                                        pickled ``(fn, items)``: ``fn`` is None for Task items,
                                        else ``(function, star)`` applied to each item. The
                                        payload is unpickled apart so that a task whose class
                                        cannot be imported on the worker fails alone, with
                                        an error the master can attribute, and never hangs
master -> worker, tag CTRL:
    ("cancel", rid)                     drop queued chunks of round rid, flag the running one
    ("skip", [cid, ...])                drop (or stop) these chunks: their twins finished
    ("ping", t)                         answer with ("pong", t)
    ("stop", reason or None, failed)    leave the serve loop (reason: the master's error;
                                        failed: ranks known dead, so the worker bounds its
                                        MPI_Finalize, see pyfw.comm.bound_finalize)
worker -> master, tag DONE:
    (cid, rid, ids, values, errors, stats, status)
        ids/values: the tasks completed, ids ascending (the master's in-order delivery
        relies on it); errors: [(position, error_info), ...]
        stats: (ntasks, sum_t, sum_t2, busy_s, idle_s, t_got, t_done) (worker clock)
        status: "ok", "aborted" (cancelled part-way), "dropped" (never started) or
        "partial" (results so far of a long chunk, sent every PARTIAL_EVERY seconds so
        results and speed estimates keep flowing; the chunk stays in flight)
worker -> master, tag CTRL:
    ("hello", host, pid, setup_error)   once, after the setup function ran
    ("pong", t)
error_info = (exc_type_name, message, formatted_traceback, host, pickled_exception_or_None)
"""

WORK = 11
CTRL = 12
DONE = 13

OK, ABORTED, DROPPED, PARTIAL = "ok", "aborted", "dropped", "partial"
PARTIAL_EVERY = 0.05
