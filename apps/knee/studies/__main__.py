"""``python -m apps.knee.studies NAME [...]``: run one validation study (see the package
docstring for the list). Under ``pyfw-run -n N`` rank 0 runs the study and the other ranks
run its simulations as farm tasks (:mod:`.ensemble`)."""
import importlib
import sys

from . import STUDIES, ensemble


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in STUDIES:
        print("usage: python -m apps.knee.studies NAME [--publish | --out DIR] [options]\n"
              "       python -m apps.knee.studies NAME --help\n\nstudies:")
        for name, what in STUDIES.items():
            print(f"  {name:12s} {what}")
        if argv and argv[0] not in ("-h", "--help"):
            print(f"\nunknown study {argv[0]!r}", file=sys.stderr)
            return 2
        return 0
    study = importlib.import_module(f"{__package__}.{argv[0]}")
    sys.argv[0] = f"python -m {__package__} {argv[0]}"   # argparse's usage line
    with ensemble.session() as runs_the_study:
        if runs_the_study:
            try:
                return study.main(argv[1:]) or 0
            except SystemExit as e:   # argparse's --help or usage error: close the farm cleanly
                return e.code if isinstance(e.code, int) else 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
