"""``InsertLayer``: a Keras layer that writes what flows through it to a table.

The layer returns its inputs unchanged and, as a side effect of every call
(``model(...)``, ``model.predict``, inside ``tf.function``), inserts them as
one item into a table with the graph-mode insert op of ``TFClient``. With
batched inputs the item holds the whole batch.

This module imports TensorFlow; ``import tf_reverb`` does not.
"""

from typing import Any, Optional

import tensorflow as tf
import tree

from tf_reverb import tf_client as tf_client_lib

__all__ = ['InsertLayer']


class InsertLayer(tf.keras.layers.Layer):
  """Identity layer that inserts its inputs into `table` on every call."""

  def __init__(
    self,
    server_address: str,
    table: str,
    priority: float = 1.0,
    name: Optional[str] = None,
    **kwargs: Any,
  ):
    """Creates the layer.

    Args:
      server_address: address of the Reverb server (or a sharded target,
        as ``TFClient`` takes it).
      table: table the inputs are inserted into.
      priority: priority of every inserted item.
      name: layer name.
      **kwargs: other ``Layer`` arguments.
    """
    super().__init__(name=name, trainable=False, **kwargs)
    self._server_address = server_address
    self._table = table
    self._priority = float(priority)
    self._client = tf_client_lib.TFClient(server_address)

  def call(self, inputs: Any) -> Any:
    flat = [tf.convert_to_tensor(x) for x in tree.flatten(inputs)]
    insert = self._client.insert(
      flat,
      tf.constant([self._table]),
      tf.constant([self._priority], tf.float64),
    )
    with tf.control_dependencies([insert]):
      return tree.map_structure(tf.identity, inputs)

  def compute_output_shape(self, input_shape: Any) -> Any:
    return input_shape

  def get_config(self) -> dict:
    return dict(
      super().get_config(),
      server_address=self._server_address,
      table=self._table,
      priority=self._priority,
    )
