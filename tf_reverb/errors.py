"""Exceptions raised by tf_reverb beyond the builtin ones.

Failures map to builtin exceptions as in Reverb: invalid arguments raise
``ValueError``, exhausted resources ``IndexError``, unimplemented calls
``NotImplementedError`` and everything else (unknown tables, cancellation,
transport failures) ``RuntimeError``. Calls that take a timeout raise
``DeadlineExceededError`` when it expires; any other expired deadline (a
server's rate-limiter timeout, the server ending an insert stream with
``DEADLINE_EXCEEDED``) raises ``DeadlineExceededRuntimeError``, a
RuntimeError. A refused bearer token raises ``UnauthenticatedError`` and a
TLS mismatch ``TransportSecurityError`` (both RuntimeErrors).

The core's status codes map to these exceptions in one place, where a status
crosses into Python (``tf_reverb/pybind_common.cc``), by code and never by
message text.
"""

import datetime
from typing import Callable

__all__ = [
  'ReverbError',
  'DeadlineExceededError',
  'DeadlineExceededRuntimeError',
  'UnauthenticatedError',
  'TransportSecurityError',
]

# The message of a rate-limiter timeout, for inserts and samples alike (as
# Reverb words it). For display and logs: exceptions are classified by status
# code, never by this text.
RATE_LIMITER_TIMEOUT_MESSAGE = (
  'Rate Limiter: Timeout exceeded before the right to insert was acquired.'
)


class ReverbError(Exception):
  """Base class of tf_reverb's own exceptions."""


class DeadlineExceededError(ReverbError):
  """A call with a timeout did not complete in time."""


class DeadlineExceededRuntimeError(ReverbError, RuntimeError):
  """A deadline the call itself did not set expired (status
  ``DEADLINE_EXCEEDED``): a server's rate-limiter timeout, an RPC deadline, an
  insert stream the server ended with that status.

  A RuntimeError, as Reverb raises it. Calls that take a timeout
  (``Client.sample``, ``Client.server_info``) re-raise it as
  DeadlineExceededError when their timeout was given.
  """


class UnauthenticatedError(ReverbError, RuntimeError):
  """The server refused the call: its bearer token was missing or wrong.

  A RuntimeError too, as Reverb raises every server error. The message never
  contains the token.
  """


class TransportSecurityError(ReverbError, RuntimeError):
  """Client and server disagree on TLS (plaintext against TLS or the reverse,
  an untrusted server certificate, a refused client certificate): the
  connection cannot be set up, so the call fails at once instead of waiting.
  """


def call_with_deadline(
  call: str, timeout_ms: int, function: Callable[[], None]
) -> None:
  """Runs a writer's `function`; re-raises its DeadlineExceededError as Reverb
  words it ("<call> call did not complete within provided timeout of ...").

  Args:
    call: 'Flush' or 'End episode'.
    timeout_ms: the timeout passed to the core (< 0: none).
    function: the core call.
  """
  try:
    function()
  except DeadlineExceededError as e:
    raise DeadlineExceededError(
      f'{call} call did not complete within provided timeout of '
      f'{datetime.timedelta(milliseconds=max(timeout_ms, 0))}'
    ) from e
