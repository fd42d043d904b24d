"""Shared implementation of ``TrajectoryDataset`` and ``TimestepDataset``.

Both are tf.data sources over the C++ dataset ops of tf_reverb/kernels
(``ReverbTrajectoryDataset`` / ``ReverbTimestepDataset``), which sample with
the core's multi-threaded ``Sampler`` (docs/concepts/datasets.md). Imports
TensorFlow.
"""

from typing import Any, Optional, Sequence, Union

import tensorflow as tf
import tree

# pylint: disable=g-direct-tensorflow-import
from tensorflow.python.data.ops import dataset_ops
# pylint: enable=g-direct-tensorflow-import

from tf_reverb import _options
from tf_reverb import client as reverb_client
from tf_reverb import credentials as credentials_lib
from tf_reverb import replay_sample
from tf_reverb import shard_target


def to_tuples(nest: Any) -> Any:
  """Python lists in `nest` become tuples (as Reverb's element specs have)."""
  return tree.traverse(
    lambda x: tuple(x) if isinstance(x, list) else None, nest, top_down=False
  )


class ReverbDatasetBase(dataset_ops.DatasetV1):
  """A tf.data source whose elements are ``ReplaySample``s from a table.

  A ``tf.compat.v1.data.Dataset`` (as Reverb's datasets are), and through it
  a ``tf.data.Dataset``: it iterates eagerly and in ``tf.function``, and in
  TF1-style graphs offers ``make_one_shot_iterator()`` and
  ``make_initializable_iterator()``. Its transformations (``map``,
  ``batch``, ...) return ``tf.compat.v1.data.Dataset``s as well.
  """

  def __init__(
    self,
    server_address: Union[str, Sequence[str], tf.Tensor],
    table: Union[str, tf.Tensor],
    dtypes: Any,
    shapes: Any,
    max_in_flight_samples_per_worker: int,
    num_workers_per_iterator: int = -1,
    max_samples_per_stream: int = -1,
    rate_limiter_timeout_ms: int = -1,
    max_samples: int = -1,
    _batch_size: int = 0,
    _drop_remainder: bool = False,
    *,
    credentials: Optional[credentials_lib.ChannelCredentials] = None,
    auth_token: Optional[str] = None,
  ):
    """Builds the source op (docs/concepts/datasets.md for the options).

    `credentials` and `auth_token` (as ``Client``'s) are registered for
    `server_address` (a string then), so the op's workers connect with them;
    without them the op uses what is registered for the address or the
    ``TF_REVERB_TLS_*`` / ``TF_REVERB_AUTH_TOKEN`` environment of the process
    running it (tf_reverb/credentials.py).

    Raises:
      ValueError: if `dtypes` and `shapes` differ in structure, or an option
        is out of range.
    """
    tree.assert_same_structure(dtypes, shapes, check_types=False)
    if isinstance(server_address, (str, bytes, list, tuple)):
      # A sharded target or list of addresses (docs/concepts/sharding.md).
      server_address = shard_target.to_target(server_address)
    if credentials is not None or auth_token is not None:
      # Registered under the target string the core sees (after to_target).
      if not isinstance(server_address, str):
        raise ValueError(
          'credentials and auth_token need a str server_address '
          'or a list of addresses'
        )
      credentials_lib.register(server_address, credentials, auth_token)
    _options.validate_sampler_options(
      max_in_flight_samples_per_worker,
      num_workers_per_iterator,
      max_samples_per_stream,
      rate_limiter_timeout_ms,
      max_samples,
    )
    self._server_address = server_address
    self._table = table
    self._dtypes = dtypes
    self._shapes = shapes
    self._max_in_flight_samples_per_worker = max_in_flight_samples_per_worker
    self._num_workers_per_iterator = num_workers_per_iterator
    self._max_samples_per_stream = max_samples_per_stream
    self._rate_limiter_timeout_ms = rate_limiter_timeout_ms
    self._max_samples = max_samples
    self._batch_size = _batch_size
    self._drop_remainder = _drop_remainder

    item_data_spec = tree.map_structure(
      lambda dtype, shape: tf.TensorSpec(
        tf.TensorShape(shape), tf.as_dtype(dtype)
      ),
      to_tuples(dtypes),
      to_tuples(shapes),
    )
    item_info_spec = replay_sample.SampleInfo(
      *[
        tf.TensorSpec(shape, dtype)
        for dtype, shape in zip(
          replay_sample.SampleInfo.tf_dtypes(),
          replay_sample.SampleInfo.tf_shapes(),
        )
      ]
    )
    item_spec = replay_sample.ReplaySample(
      info=item_info_spec, data=item_data_spec
    )
    flat = tree.flatten(item_spec)
    if _batch_size:
      batch_dim = tf.TensorShape([_batch_size if _drop_remainder else None])
      self._element_spec = tree.map_structure(
        lambda spec: tf.TensorSpec(
          batch_dim.concatenate(spec.shape), spec.dtype
        ),
        item_spec,
      )
    else:
      self._element_spec = item_spec

    # pylint: disable=g-import-not-at-top
    from tf_reverb.ops import reverb_ops

    # pylint: enable=g-import-not-at-top
    batch_attrs = (
      {}
      if self._op_name == 'reverb_timestep_dataset'
      else dict(batch_size=_batch_size, drop_remainder=_drop_remainder)
    )
    variant = getattr(reverb_ops, self._op_name)(
      **batch_attrs,
      server_address=server_address,
      table=table,
      dtypes=[spec.dtype for spec in flat],
      shapes=[spec.shape for spec in flat],
      max_in_flight_samples_per_worker=max_in_flight_samples_per_worker,
      num_workers_per_iterator=num_workers_per_iterator,
      max_samples_per_stream=max_samples_per_stream,
      rate_limiter_timeout_ms=rate_limiter_timeout_ms,
      max_samples=max_samples,
    )
    # DatasetV1's constructor asks _as_variant_tensor() for the variant.
    self._reverb_variant = variant
    super().__init__()

  _op_name = ''

  def _as_variant_tensor(self) -> tf.Tensor:
    """The variant of the source op built by the constructor."""
    return self._reverb_variant

  def _inputs(self) -> list:
    """A source: no input datasets."""
    return []

  @property
  def element_spec(self) -> Any:
    """ReplaySample(info=SampleInfo of scalar specs, data=nest of specs)."""
    return self._element_spec

  @classmethod
  def from_table_signature(
    cls,
    server_address: Union[str, Sequence[str]],
    table: str,
    max_in_flight_samples_per_worker: int,
    num_workers_per_iterator: int = -1,
    max_samples_per_stream: int = -1,
    rate_limiter_timeout_ms: int = -1,
    get_signature_timeout_secs: Optional[int] = None,
    max_samples: int = -1,
    *,
    credentials: Optional[credentials_lib.ChannelCredentials] = None,
    auth_token: Optional[str] = None,
  ) -> 'ReverbDatasetBase':
    """A dataset whose dtypes and shapes are the table's signature.

    Args:
      server_address: "host:port" of the server, or a sharded target
        ("ipv4:A:P,B:Q", "dns:///name:port", a list of "host:port";
        docs/concepts/sharding.md): worker streams then spread over the healthy shards,
        the dataset keeps producing while any shard is up, and max_samples
        counts over all shards.
      table: name of the table.
      max_in_flight_samples_per_worker: samples requested per request.
      num_workers_per_iterator: sampler workers per iterator (-1: 1, or one
        per shard on a sharded target).
      max_samples_per_stream: samples per gRPC stream (-1: 10 000).
      rate_limiter_timeout_ms: -1: wait forever; else end the dataset when
        no sample could be served in that time (0: immediately).
      get_signature_timeout_secs: timeout of the ServerInfo call fetching
        the signature (None: wait for the server).
      max_samples: -1: unlimited; else the dataset ends after that many.
      credentials: TLS credentials, as ``Client``'s.
      auth_token: bearer token, as ``Client``'s.

    Raises:
      ValueError: if the server has no such table, or it has no signature.
    """
    client = reverb_client.Client(
      server_address, credentials=credentials, auth_token=auth_token
    )
    server_address = client.server_address
    info = client.server_info(get_signature_timeout_secs)
    if table not in info:
      raise ValueError(
        f'Server at {server_address} does not contain any table named '
        f'{table}. Found: {", ".join(sorted(info.keys()))}.'
      )
    signature = info[table].signature
    if not signature:
      raise ValueError(
        f'Table {table} at {server_address} does not have a signature.'
      )
    shapes = tree.map_structure(lambda spec: spec.shape, signature)
    dtypes = tree.map_structure(lambda spec: spec.dtype, signature)
    return cls(
      server_address=server_address,
      table=table,
      shapes=shapes,
      dtypes=dtypes,
      max_in_flight_samples_per_worker=max_in_flight_samples_per_worker,
      num_workers_per_iterator=num_workers_per_iterator,
      max_samples_per_stream=max_samples_per_stream,
      rate_limiter_timeout_ms=rate_limiter_timeout_ms,
      max_samples=max_samples,
    )
