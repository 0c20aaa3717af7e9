"""Every exception pyfw defines lives in pyfw.errors under PyfwError; old import paths work."""
import inspect

import pyfw
from pyfw import errors


def test_every_exception_in_errors_is_a_pyfw_error():
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)
               if issubclass(c, BaseException) and c.__module__ == errors.__name__]
    assert len(classes) >= len(errors.__all__) - 1
    assert [c.__name__ for c in classes if not issubclass(c, errors.PyfwError)] == []
    assert set(errors.__all__) <= set(dir(pyfw))


def test_moved_exceptions_keep_their_old_import_paths():
    from pyfw.domain._util import RemoteError
    from pyfw.farm.journal import JournalError
    assert RemoteError is errors.RemoteError and JournalError is errors.JournalError
    assert issubclass(errors.ConfigurationError, ValueError)   # user code catching ValueError
