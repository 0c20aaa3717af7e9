"""apps.rubik parallel search on pyfw.farm: same answers and node counts as serial."""
import pytest
from mpi4py import MPI

from mpi_util import agree
from apps.rubik import Cube, Heuristic, Solver
from apps.rubik.parallel import prefixes_at, preload, solve_parallel
from pyfw.farm import Farm

DEPTH = 5          # truncated phase-1 tables, built in memory on every rank (fast)


def test_prefixes_at_depth_two_are_the_243_subtrees():
    assert len(prefixes_at(2)) == 243 and len(prefixes_at(3)) == 3240


def _on_master(check, **farm_options):
    """Run ``check(farm, tables, serial_solver)`` on the master of a farm over every rank;
    an assertion failure there fails the test on every rank."""
    ok, msg = True, ""
    with Farm(MPI.COMM_WORLD, **farm_options) as farm:
        if farm.is_master:
            try:
                h = Heuristic("phase1", progress=False, max_depth=DEPTH)
                check(farm, h, Solver(tables=h))
            except AssertionError as e:
                ok, msg = False, str(e) or repr(e)
    agree(ok, msg)


@pytest.mark.mpi(min_size=2)
def test_parallel_equals_serial_in_solve_prove_and_all_modes():
    def check(farm, h, serial):
        for scramble, split in (("R U2 F' L D B2 R'", 2), ("F2 D L' U R2 B D'", 3),
                                ("U R2 F B R B2 R U2", "adaptive"),
                                # symmetric: both drop the same equivalent subtrees
                                ("U D' R L' F B' U D'", 2)):
            cube = Cube.from_moves(scramble)
            s = serial.solve(cube)
            # local_nodes=0: every round goes to the workers; default: small rounds
            # stay on the master
            for local in (0, 20000):
                p = solve_parallel(cube, farm, "phase1", split=split, max_depth=DEPTH,
                                   tables=h, local_nodes=local, order="serial")
                assert p.length == s.length and cube.apply(p.solution).is_solved
                # complete iterations (below the optimum) count the same nodes
                assert [(i.bound, i.generated, i.expanded) for i in p.iterations[:-1]] == \
                    [(i.bound, i.generated, i.expanded) for i in s.iterations[:-1]]
                pp = solve_parallel(cube, farm, "phase1", split=split, max_depth=DEPTH,
                                    tables=h, max_length=s.length - 1, local_nodes=local,
                                    order="serial")
                assert pp.solution is None and pp.lower_bound == s.length
                assert pp.generated == sum(i.generated for i in s.iterations[:-1])
                if local == 0:
                    assert sum(w["tasks"] for r, w in p.workers.items() if r != 0) > 0
                assert any(i.local for i in p.iterations) == (local > 0)
        cube = Cube.from_moves("R U2 F' L")
        sa = serial.solve(cube, all_solutions=True)
        pa = solve_parallel(cube, farm, "phase1", max_depth=DEPTH, tables=h,
                            all_solutions=True, local_nodes=0)
        assert sorted(pa.solutions) == sorted(sa.solutions)
        assert pa.iterations[-1].generated == sa.iterations[-1].generated
    _on_master(check)


@pytest.mark.mpi(min_size=2)
def test_serial_order_reaches_the_serial_search_s_solution():
    # subtrees go out in the order one process searches them (depth first, moves ascending):
    # with one worker the farm finds the serial search's first solution, the smallest in
    # that order; with more it still returns an optimal one. The old order is on request.
    def check(farm, h, serial):
        for scramble in ("R U2 F' L D B2 R'", "U R2 F B R B2 R U2"):
            cube = Cube.from_moves(scramble)
            s = serial.solve(cube)
            for split in (2, "adaptive"):
                p = solve_parallel(cube, farm, "phase1", split=split, max_depth=DEPTH,
                                   tables=h, local_nodes=0, order="serial")
                assert p.length == s.length and cube.apply(p.solution).is_solved
                if farm.num_workers == 1:
                    assert p.solution == s.solution, (p.solution, s.solution)
            q = solve_parallel(cube, farm, "phase1", max_depth=DEPTH, tables=h,
                               order="largest", local_nodes=0)
            assert q.length == s.length
        with pytest.raises(ValueError, match="order"):
            solve_parallel(cube, farm, "phase1", max_depth=DEPTH, tables=h, order="x")
    _on_master(check)


@pytest.mark.mpi(min_size=2)
def test_dense_order_the_default_counts_the_serial_nodes_and_is_optimal():
    # the default order: the ordered iterations, scheduled as a batch of one cube; with
    # yield_after=0 every task hands its rest on after one slice, so an iteration of
    # more than one slice is split over every worker. Exhausted iterations count exactly the serial
    # solver's nodes (which searches in the same order), a proof their sum; each
    # iteration is reported as the master learns it is complete, the last with the solution
    def check(farm, h, serial):
        workers = set()
        for scramble in ("F2 D L' U R2 B D' R F U2 L", "R U2 F' L D B2 R' U L2 F D' B",
                         "U D' R L' F B' U D'"):          # the last one symmetric
            cube = Cube.from_moves(scramble)
            s = serial.solve(cube)
            seen = []
            p = solve_parallel(cube, farm, "phase1", max_depth=DEPTH, tables=h,
                               yield_after=0.0, on_iteration=seen.append)
            assert p.length == s.length and cube.apply(p.solution).is_solved
            assert p.solutions == [p.solution] and p.symmetries == s.symmetries
            assert [(i.bound, i.generated, i.expanded) for i in p.iterations[:-1]] == \
                [(i.bound, i.generated, i.expanded) for i in s.iterations[:-1]]
            assert seen == p.iterations and [i.bound for i in seen] == \
                [i.bound for i in s.iterations]
            assert [i.solutions for i in seen] == [0] * (len(seen) - 1) + [1]
            pp = solve_parallel(cube, farm, "phase1", max_depth=DEPTH, tables=h,
                                yield_after=0.0, max_length=s.length - 1)
            assert pp.solution is None and pp.solutions == []
            assert pp.lower_bound == s.length
            assert pp.generated == sum(i.generated for i in s.iterations[:-1])
            # a proof searches every piece to its end: those of the 12-mover's bound 11
            # (624,127 nodes, slices of 131,072) are split over every worker
            workers.update(r for r, w in pp.workers.items() if w["generated"])
        assert len(workers) == farm.num_workers, (workers, farm.num_workers)
        done = solve_parallel(Cube.solved(), farm, "phase1", max_depth=DEPTH, tables=h)
        assert done.solution == [] and done.solutions == [[]] and done.lower_bound == 0
    # the workers load their tables as they start (as the CLI's do), so that all of them
    # are ready for the first cube's pieces
    _on_master(check, setup=preload, setup_args=("phase1", None, DEPTH, True, "shared"))


@pytest.mark.mpi(min_size=2)
def test_stealing_loses_and_duplicates_no_subtree():
    # with tiny slices and yield_after=0 every piece hands its remainder back after one
    # slice, so an iteration is searched as hundreds of pieces on all workers (and a piece
    # of several small leaves hands back the leaves it did not reach); complete
    # iterations must still count exactly the serial nodes, proofs their sum, and
    # solutions stay optimal
    ok, msg = True, ""
    with Farm(MPI.COMM_WORLD) as farm:
        if farm.is_master:
            try:
                h = Heuristic("phase1", progress=False, max_depth=5)
                serial = Solver(tables=h)
                tasks = [0, 0, 0, 0]
                for scramble in ("F2 D L' U R2 B D' R F U2 L", "R U2 F' L D B2 R' U L2 F"):
                    cube = Cube.from_moves(scramble)
                    s = serial.solve(cube)
                    p = solve_parallel(cube, farm, "phase1", max_depth=5, tables=h,
                                       local_nodes=0, budget=20, yield_after=0.0,
                                       order="serial")
                    assert p.length == s.length and cube.apply(p.solution).is_solved
                    assert [(i.bound, i.generated, i.expanded) for i in p.iterations[:-1]] == \
                        [(i.bound, i.generated, i.expanded) for i in s.iterations[:-1]]
                    pp = solve_parallel(cube, farm, "phase1", max_depth=5, tables=h,
                                        local_nodes=0, budget=20, yield_after=0.0,
                                        max_length=s.length - 1, order="serial")
                    assert pp.solution is None and pp.lower_bound == s.length
                    assert pp.generated == sum(i.generated for i in s.iterations[:-1])
                    off = solve_parallel(cube, farm, "phase1", max_depth=5, tables=h,
                                         local_nodes=0, budget=20, steal=False,
                                         max_length=s.length - 1, order="serial")
                    assert off.generated == pp.generated
                    # small leaves go out several to a piece (unless group_nodes=0)
                    grouped, single = (solve_parallel(cube, farm, "phase1", max_depth=5,
                                                      tables=h, local_nodes=0, budget=20,
                                                      max_length=s.length - 1, group_nodes=g,
                                                      order="serial")
                                       for g in (1 << 17, 0))
                    assert grouped.generated == single.generated == pp.generated
                    for k, r in enumerate((pp, off, grouped, single)):
                        tasks[k] += sum(i.tasks for i in r.iterations)
                assert tasks[0] > 2 * tasks[1], tasks         # pieces were handed on
                assert tasks[2] < tasks[3], tasks             # leaves were grouped
            except AssertionError as e:
                ok, msg = False, str(e) or repr(e)
    agree(ok, msg)
