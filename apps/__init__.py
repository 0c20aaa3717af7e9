"""Reference applications on pyfw: ``apps.rubik`` (optimal cube solver) and ``apps.knee``
(knee-cooling simulation).

Installed, they are ``pyfw.apps``; in the checkout they are also ``apps`` (``python -m
apps.rubik``). Where the installed ``pyfw.apps`` is these very files (an editable install
of this checkout), ``apps.X`` *is* the module ``pyfw.apps.X``, not a second copy of it:
numba caches compiled kernels beside their source file and records the name of the module
that compiled them, so two names over one file let a run from the checkout leave cache
entries that a run elsewhere (``pyfw-rubik``, ``python -m pyfw.apps.rubik``) cannot load
("No module named 'apps'"). Two copies would also hold two sets of tables and two classes
for every type. The alias also works the other way round: a process that imports
``pyfw.apps`` first (from anywhere) resolves ``apps.X`` to it, so entries cached under the
checkout's names by an older version still load.
"""
import importlib
import importlib.util
import os as _os
import sys as _sys

# As in pyfw/__init__.py: no colorama escape on a rank's pty stdout at exit (numba loads
# after this line in both apps).
_os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")

INSTALLED = "pyfw.apps"
ALIAS = "apps"


class _SameModule:
    """Meta-path finder and loader: ``apps.X`` is the already imported ``pyfw.apps.X``."""
    pyfw_alias = True

    @staticmethod
    def find_spec(name, path=None, target=None):
        if not name.startswith(ALIAS + "."):
            return None
        real = importlib.util.find_spec(INSTALLED + name[len(ALIAS):])
        if real is None:
            return None
        spec = importlib.util.spec_from_loader(name, _SameModule, origin=real.origin,
                                               is_package=real.submodule_search_locations is not None)
        if real.submodule_search_locations is not None:
            spec.submodule_search_locations = list(real.submodule_search_locations)
        spec.loader_state = real
        return spec

    @staticmethod
    def create_module(spec):
        return importlib.import_module(spec.loader_state.name)

    @staticmethod
    def exec_module(module):
        # already run under its installed name; the import machinery has just set the
        # alias's spec on it, so give it back its own
        module.__spec__ = module.__spec__.loader_state

    @staticmethod
    def get_code(name):
        """The module's code object (``runpy``: ``python -m apps.rubik``)."""
        real = INSTALLED + name[len(ALIAS):]
        return importlib.util.find_spec(real).loader.get_code(real)


def _same_files_installed():
    """The installed ``pyfw.apps`` if it is this directory, else None."""
    try:
        spec = importlib.util.find_spec(INSTALLED)
    except ImportError:
        return None
    here = _os.path.dirname(_os.path.realpath(__file__))
    if spec is None or not spec.origin or \
            _os.path.dirname(_os.path.realpath(spec.origin)) != here:
        return None
    return importlib.import_module(INSTALLED)


def _is_checkout():
    """This directory is a checkout's ``apps`` beside its ``pyfw`` (not site-packages)."""
    here = _os.path.dirname(_os.path.realpath(__file__))
    return (_os.path.basename(here) == ALIAS and
            _os.path.isfile(_os.path.join(_os.path.dirname(here), "pyfw", "__init__.py")))


def _install_alias(module):
    if not any(getattr(f, "pyfw_alias", False) for f in _sys.meta_path):
        _sys.meta_path.insert(0, _SameModule)
    _sys.modules[ALIAS] = module


if __name__ == ALIAS:
    _installed = _same_files_installed()
    if _installed is not None:
        _install_alias(_installed)              # ``import apps`` binds pyfw.apps
elif __name__ == INSTALLED and ALIAS not in _sys.modules and _is_checkout():
    # an editable install imported by its installed name: the checkout's name is this module
    # too (never for an install into site-packages, where ``apps`` may be another project's)
    _install_alias(_sys.modules[INSTALLED])
