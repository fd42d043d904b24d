"""Keras helpers for the learner -> actors weight channel.

``WeightsPublisher`` is a ``tf.keras.callbacks.Callback`` that inserts the
model's weights into a table every N batches and/or epochs;
``load_latest_weights`` samples the newest published weights and sets them on
a model of the same architecture (typically on the actor side).

The table should keep only the newest weights, e.g. ``weights_table(name)``
(max_size 1, LIFO sampler, FIFO remover: every publish replaces the previous
weights and sampling never consumes them). With ``Table.queue(name, 1)``
instead, every published version is consumed by exactly one load, and
publishing blocks until the previous version was loaded.

This module imports TensorFlow (Keras); ``import tf_reverb`` does not import
it, the names resolve lazily.
"""

from typing import Any, List, Optional, Union

import numpy as np
import tensorflow as tf

from tf_reverb import client as client_lib
from tf_reverb import item_selectors
from tf_reverb import rate_limiters
from tf_reverb import server as server_lib

__all__ = ['WeightsPublisher', 'load_latest_weights', 'weights_table']


def weights_table(name: str) -> server_lib.Table:
  """A table holding only the newest published weights (max_size 1, LIFO)."""
  return server_lib.Table(
    name=name,
    sampler=item_selectors.Lifo(),
    remover=item_selectors.Fifo(),
    max_size=1,
    rate_limiter=rate_limiters.MinSize(1),
  )


def _as_client(client: Union[client_lib.Client, str]) -> client_lib.Client:
  if isinstance(client, str):
    return client_lib.Client(client)
  return client


class WeightsPublisher(tf.keras.callbacks.Callback):
  """Publishes a model's weights to a table during ``fit``.

  Each publish inserts one item ``{'version': int64, 'weights': [arrays]}``
  (``model.get_weights()`` order) with the given priority. `version` counts
  the publishes of this callback, starting at 1.
  """

  def __init__(
    self,
    client: Union[client_lib.Client, str],
    table: str,
    *,
    every_n_batches: Optional[int] = None,
    every_n_epochs: Optional[int] = 1,
    priority: float = 1.0,
    publish_on_train_end: bool = True,
  ):
    """Creates the callback.

    Args:
      client: a ``Client`` or a server address.
      table: the table to insert the weights into.
      every_n_batches: publish after every N training batches (None: never).
      every_n_epochs: publish after every N epochs (None: never).
      priority: priority of the inserted items.
      publish_on_train_end: also publish when ``fit`` ends.

    Raises:
      ValueError: for a non-positive N.
    """
    super().__init__()
    for name, value in (
      ('every_n_batches', every_n_batches),
      ('every_n_epochs', every_n_epochs),
    ):
      if value is not None and value < 1:
        raise ValueError(f'{name} must be None or >= 1, got {value}')
    self._client = _as_client(client)
    self._table = table
    self._every_n_batches = every_n_batches
    self._every_n_epochs = every_n_epochs
    self._priority = float(priority)
    self._publish_on_train_end = publish_on_train_end
    self._batches = 0
    self._version = 0
    self._published_at_batch = -1

  @property
  def version(self) -> int:
    """Number of publishes so far (the version of the latest one)."""
    return self._version

  def publish(self) -> int:
    """Inserts the model's current weights now; returns their version."""
    self._version += 1
    weights = [np.asarray(w) for w in self.model.get_weights()]
    self._client.insert(
      {'version': np.int64(self._version), 'weights': weights},
      {self._table: self._priority},
    )
    self._published_at_batch = self._batches
    return self._version

  def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
    self._batches += 1
    if self._every_n_batches and self._batches % self._every_n_batches == 0:
      self.publish()

  def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
    if (
      self._every_n_epochs
      and (epoch + 1) % self._every_n_epochs == 0
      and self._published_at_batch != self._batches
    ):
      self.publish()

  def on_train_end(self, logs: Any = None) -> None:
    if self._publish_on_train_end and self._published_at_batch != self._batches:
      self.publish()


def load_latest_weights(
  client: Union[client_lib.Client, str],
  table: str,
  model: tf.keras.Model,
  *,
  timeout: Optional[float] = None,
) -> int:
  """Sets the newest weights published to `table` on `model`.

  Args:
    client: a ``Client`` or a server address.
    table: the table ``WeightsPublisher`` writes to.
    model: a model of the same architecture as the publisher's.
    timeout: seconds to wait for weights to be available; None waits.

  Returns:
    The version of the loaded weights.

  Raises:
    DeadlineExceededError: when no weights arrived within `timeout`.
    ValueError: when the published weights do not fit the model.
  """
  sample = next(
    _as_client(client).sample(
      table, num_samples=1, emit_timesteps=False, timeout=timeout
    )
  )
  # Flattened {'version', 'weights': [...]}; every column has a leading
  # dimension of 1 (Client.insert items).
  columns: List[np.ndarray] = list(sample.data)
  version = int(columns[0][0])
  weights = [column[0] for column in columns[1:]]
  expected = model.get_weights()
  if len(weights) != len(expected):
    raise ValueError(
      f'Published weights have {len(weights)} arrays but the model has '
      f'{len(expected)}.'
    )
  for i, (got, want) in enumerate(zip(weights, expected)):
    if got.shape != want.shape:
      raise ValueError(
        f'Published weight {i} has shape {got.shape} but the model expects '
        f'{want.shape}.'
      )
  model.set_weights(weights)
  return version
