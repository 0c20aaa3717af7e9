"""Old home of :func:`~pyfw.domain.comms.as_comm` and :func:`~pyfw.domain.comms.agree`
(and an old import path of :class:`~pyfw.errors.RemoteError`): kept so that old imports go on
working. Import :mod:`pyfw.domain.comms`; nothing in pyfw or its apps imports this module."""
from ..errors import ConfigurationError, RemoteError  # noqa: F401
from .comms import agree, as_comm  # noqa: F401
