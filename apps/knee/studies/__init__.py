"""The knee model's validation studies: each sets up published measurements (or bounding
cases) as model runs and compares. One entry point::

    python -m apps.knee.studies NAME [--publish | --out DIR] [options]
    python -m apps.knee.studies NAME --help

=============  =========================================================  ==========
NAME           question                                                   time here
=============  =========================================================  ==========
validation     the model against measured knees (fits, held-out errors)   ~20 min
sensitivity    which inputs move the 90-min drop; writes the band the      ~5 min
               CLI prints (``apps/knee/sensitivity.json``, with
               ``--publish``)
postop         post-operative knees by their starting temperature          ~10 min
muscle         muscle under ice against Otte 2002 and Myrer 2001           ~4 min
plateau        what limits the late cooling (bounding cases)               ~5 min
convergence    the default scenario on finer and finer grids (MPI)         ~30 min
sobol          Sobol first/total-order indices of the 90-min drop over     N * 14 runs
               the sensitivity study's inputs, all varied at once
               (needs SALib: the ``studies`` extra)
=============  =========================================================  ==========

Under ``pyfw-run -n N -- python -m apps.knee.studies NAME [--ranks K]`` the study is an
ensemble: rank 0 runs it and its simulations are farm tasks on groups of ``K`` ranks
(:mod:`.ensemble`; the figures are the same as from one process, bitwise).

Each study module keeps the code that runs one of its simulations in one function,
``simulate``; everything else is set-up and comparison. Results go to
``apps/knee/studies/results/local/`` (untracked) unless ``--out DIR`` names another
directory; ``--publish`` writes the tracked ``apps/knee/studies/results/`` that
``docs/knee.md`` quotes (and, for ``sensitivity``, the package data).
"""

#: name -> one line on what the study asks
STUDIES = {
    "validation": "the model against measured knees: fit on some studies, error on the others",
    "sensitivity": "one parameter at a time over its range; writes the CLI's uncertainty band",
    "postop": "post-operative knees by the cavity's temperature at the operation's end",
    "muscle": "muscle under ice against Otte 2002 and Myrer 2001",
    "plateau": "what limits the late cooling: the default scenario against bounding cases",
    "convergence": "grid convergence of the default scenario (Richardson extrapolation)",
    "sobol": "global sensitivity: Sobol indices of the 90-min drop, all inputs at once",
}
