"""``TFClient``: graph-mode inserts, samples and priority updates as TF ops.

Usable inside ``tf.function`` with no Python per call.
"""

from typing import Any, Optional, Sequence, Union

import tensorflow as tf
import tree

from tf_reverb import credentials as credentials_lib
from tf_reverb import replay_sample
from tf_reverb import shard_target
from tf_reverb.ops import reverb_ops

__all__ = ['TFClient']


class TFClient:
  """A client of a Reverb server for TensorFlow graphs.

  Its ops (``insert``, ``sample``, ``update_priorities``) run
  inside ``tf.function``s and TF1 graphs.

  Example:
    ```python
    import tensorflow as tf
    import tf_reverb as reverb

    server = reverb.Server(tables=[reverb.Table.queue('steps', max_size=10)],
                           host='127.0.0.1')
    tf_client = reverb.TFClient(f'localhost:{server.port}')

    @tf.function
    def act(observation):
      tf_client.insert([observation], tables=tf.constant(['steps']),
                       priorities=tf.constant([1.0], tf.float64))

    act(tf.constant([1.0, 2.0]))
    sample = tf_client.sample('steps', [tf.float32])
    print(sample.data[0])  # tf.Tensor([1. 2.], ...)
    server.stop()
    ```"""

  def __init__(
    self,
    server_address: Union[str, Sequence[str]],
    shared_name: Optional[str] = None,
    name: str = 'reverb',
    *,
    credentials: Optional[credentials_lib.ChannelCredentials] = None,
    auth_token: Optional[str] = None,
  ):
    """Creates the client resource (one gRPC channel) for `server_address`.

    Args:
      server_address: "host:port", or a sharded target or list of addresses
        (docs/concepts/sharding.md): samples come from the healthy shards, inserts
        go to one shard each, update_priorities reaches every shard.
      shared_name: resource name shared between graphs (default: unique).
      name: op name.
      credentials: TLS credentials (as ``Client``'s).
      auth_token: bearer token (as ``Client``'s).

    `credentials` and `auth_token` are registered for the target string
    (after ``shard_target.to_target``); without them the ops use what is
    registered for it, else the ``TF_REVERB_TLS_*`` / ``TF_REVERB_AUTH_TOKEN``
    environment (tf_reverb/credentials.py).

    Raises:
      ValueError: for a malformed sharded target or address list.
    """
    server_address = shard_target.to_target(server_address)
    credentials_lib.register_if_given(server_address, credentials, auth_token)
    self._server_address = server_address
    self._handle = reverb_ops.reverb_client(
      server_address=server_address, shared_name=shared_name or '', name=name
    )

  @property
  def server_address(self) -> str:
    """The address of the server."""
    return self._server_address

  def sample(
    self, table: str, data_dtypes: Any, name: Optional[str] = None
  ) -> replay_sample.ReplaySample:
    """Samples one item of `table` and returns its first timestep.

    As in Reverb, the data is the item's FIRST TIMESTEP: row 0 of every
    column (a squeezed column as it is), without a time axis. An item
    inserted by ``TFClient.insert`` or ``Client.insert`` (one step) thus comes
    back with the shapes it was inserted with; the later timesteps of a
    longer item are silently dropped (sample whole trajectories with
    ``TrajectoryDataset`` or ``Client.sample``). Each call opens a new
    sampler for one sample and blocks until the table's rate limiter allows
    it.

    Args:
      table: name of the table.
      data_dtypes: nest of dtypes of the item's columns, in column order.
      name: op name.

    Returns:
      A ``ReplaySample`` whose data has the structure of `data_dtypes`; the
      data tensors have statically unknown shapes.

    Raises:
      tf.errors.InvalidArgumentError: when the op runs, if the item's number
        of columns or their dtypes do not match `data_dtypes` (the message
        names the column and both dtypes).
      tf.errors.NotFoundError: when the op runs, for an unknown table.
    """
    with tf.name_scope(name or 'sample'):
      flat_dtypes = [tf.as_dtype(d) for d in tree.flatten(data_dtypes)]
      key, probability, table_size, priority, times_sampled, data = (
        reverb_ops.reverb_client_sample(
          self._handle, table, Toutput_list=flat_dtypes
        )
      )
      info = replay_sample.SampleInfo(
        key, probability, table_size, priority, times_sampled
      )
      return replay_sample.ReplaySample(
        info, tree.unflatten_as(data_dtypes, data)
      )

  def insert(
    self,
    data: Sequence[tf.Tensor],
    tables: tf.Tensor,
    priorities: tf.Tensor,
    name: Optional[str] = None,
    *,
    policy_version: Optional[Any] = None,
  ) -> tf.Operation:
    """Inserts `data` as one item into each of `tables`.

    Args:
      data: tensors of one step (one column each).
      tables: rank-1 string tensor of table names.
      priorities: rank-1 float64 tensor, one priority per table.
      name: op name.
      policy_version: the version of the policy that produced the data, a
        scalar int64 (a tensor may change from call to call of one graph; a
        tf_reverb extension, see ``Client.set_policy_version``). None: each
        table's current version. A negative version fails the op
        (InvalidArgumentError).

    Raises:
      TypeError: for a `policy_version` that is not an integer.
      ValueError: unless `tables` is rank-1 string and `priorities` rank-1
        float64 of a compatible shape, or `policy_version` is not a scalar.
    """
    tables = tf.convert_to_tensor(tables)
    priorities = tf.convert_to_tensor(priorities)
    if tables.dtype != tf.string or tables.shape.rank != 1:
      raise ValueError(f'tables must be a rank 1 string tensor, got {tables}')
    if priorities.dtype != tf.float64 or priorities.shape.rank != 1:
      raise ValueError(
        f'priorities must be a rank 1 float64 tensor, got {priorities}'
      )
    if not tables.shape.is_compatible_with(priorities.shape):
      raise ValueError(
        f'tables and priorities must have the same shape, got '
        f'{tables.shape} and {priorities.shape}'
      )
    with tf.name_scope(name or 'insert'):
      if policy_version is None:
        return reverb_ops.reverb_client_insert(
          self._handle, tree.flatten(data), tables, priorities
        )
      policy_version = tf.convert_to_tensor(policy_version)
      if not policy_version.dtype.is_integer:
        raise TypeError(
          f'policy_version must be an integer, got {policy_version}'
        )
      if policy_version.shape.rank not in (None, 0):
        raise ValueError(
          f'policy_version must be a scalar, got {policy_version}'
        )
      policy_version = tf.cast(policy_version, tf.int64)
      return reverb_ops.reverb_client_insert_with_policy_version(
        self._handle, tree.flatten(data), tables, priorities, policy_version
      )

  def update_priorities(
    self,
    table: str,
    keys: tf.Tensor,
    priorities: tf.Tensor,
    name: Optional[str] = None,
  ) -> tf.Operation:
    """Sets the priorities of items `keys` of `table`; absent keys are ignored.

    On a sharded client every reachable shard gets the whole update and
    applies the keys it has.
    """
    with tf.name_scope(name or 'update_priorities'):
      return reverb_ops.reverb_client_update_priorities(
        self._handle,
        table,
        tf.cast(keys, tf.uint64),
        tf.cast(priorities, tf.float64),
      )
