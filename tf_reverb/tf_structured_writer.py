"""``TFStructuredWriter``: the StructuredWriter as TensorFlow ops.

Reverb's writers are Python objects; an actor whose whole loop is a
``tf.function`` needs a writer it can call from the graph. This one runs the
same C++ StructuredWriter as ``Client.structured_writer`` (one insert stream,
chunking, the pattern engine) behind a TF resource, so each ``append`` is one
op with no Python per step. Items are declared with ``reverb.structured``
configs; steps have every leaf present (no partial steps).
"""

import uuid
from typing import Any, Optional, Sequence, Union

import tensorflow as tf
import tree

from tf_reverb import shard_target
from tf_reverb import structured_writer
from tf_reverb.ops import reverb_ops

__all__ = ['TFStructuredWriter']


class TFStructuredWriter:
  """A StructuredWriter usable eagerly and inside ``tf.function``."""

  def __init__(
    self,
    server_address: Union[str, Sequence[str]],
    configs: Sequence[structured_writer.Config],
    name: str = 'structured_writer',
  ):
    """Creates the writer resource (its own insert stream) for the server.

    Args:
      server_address: 'host:port' of the Reverb server, or a sharded target
        or list of addresses (docs/concepts/sharding.md: the writer's stream lives
        on one shard and moves, with its unconfirmed items, when that shard
        fails).
      configs: ``reverb.structured`` configs; a ``buffer_length`` condition
        is added to each that lacks one.
      name: op name.

    Raises:
      ValueError: if no config is given or a config is invalid (when created
        eagerly; inside a graph the error is raised when the op runs).
    """
    if not configs:
      raise ValueError('At least one config must be provided.')
    server_address = shard_target.to_target(server_address)
    self._server_address = server_address
    try:
      self._handle = reverb_ops.reverb_structured_writer(
        server_address=server_address,
        configs=[config.SerializeToString() for config in configs],
        shared_name=f'tf_reverb_structured_writer_{uuid.uuid4().hex}',
        name=name,
      )
    except tf.errors.InvalidArgumentError as e:
      raise ValueError(e.message) from e

  @property
  def server_address(self) -> str:
    """The address of the server."""
    return self._server_address

  def append(
    self, data: Any, name: Optional[str] = None
  ) -> Optional[tf.Operation]:
    """Appends one step and creates the items of every config that applies.

    Args:
      data: the step, a nest of tensors flattened in dm-tree order; the
        flattened length must stay the same.
      name: op name.

    Returns:
      The op (None when executing eagerly).
    """
    flat = [tf.convert_to_tensor(leaf) for leaf in tree.flatten(data)]
    return reverb_ops.reverb_structured_writer_append(
      self._handle, flat, name=name
    )

  def flush(
    self,
    block_until_num_items: int = 0,
    timeout_ms: int = -1,
    name: Optional[str] = None,
  ) -> Optional[tf.Operation]:
    """Waits until at most `block_until_num_items` items are unconfirmed.

    Raises (when the op runs) ``tf.errors.DeadlineExceededError`` after
    `timeout_ms` (< 0: no timeout).
    """
    return reverb_ops.reverb_structured_writer_flush(
      self._handle,
      block_until_num_items=block_until_num_items,
      timeout_ms=timeout_ms,
      name=name,
    )

  def end_episode(
    self,
    clear_buffers: bool = True,
    timeout_ms: int = -1,
    name: Optional[str] = None,
  ) -> Optional[tf.Operation]:
    """Creates the end-of-episode items, flushes and starts a new episode.

    Raises (when the op runs) ``tf.errors.DeadlineExceededError`` after
    `timeout_ms` (< 0: no timeout); the end-of-episode items were created
    then, but nothing was reset.
    """
    return reverb_ops.reverb_structured_writer_end_episode(
      self._handle,
      clear_buffers=clear_buffers,
      timeout_ms=timeout_ms,
      name=name,
    )
