"""``TrajectoryDataset``: one element per sampled item (docs/concepts/datasets.md).

Imports TensorFlow; reach it as ``tf_reverb.TrajectoryDataset`` (resolved on
first access).
"""

from typing import Any, Optional

import numpy as np

from tf_reverb import _reverb_dataset

__all__ = ['TrajectoryDataset']


class TrajectoryDataset(_reverb_dataset.ReverbDatasetBase):
  """A tf.data source of whole sampled trajectories.

  Each element is ``ReplaySample(info=SampleInfo(...), data=...)`` where
  ``data`` has the structure of `dtypes`/`shapes` and each column its full
  time dimension (unless squeezed). Samples are fetched by C++ worker threads
  (``num_workers_per_iterator``, each asking for
  ``max_in_flight_samples_per_worker`` at a time) and decompressed straight
  into the element's tensors. The dataset ends after ``max_samples`` samples,
  or when no sample could be served within ``rate_limiter_timeout_ms`` (-1:
  wait forever; 0: give up at once, in-process and over gRPC alike). A
  sample whose columns do not match `dtypes`/`shapes` raises
  InvalidArgumentError naming the column and both specs.

  Usable with ``batch``, ``prefetch``, ``interleave``, ``tf.function`` and
  ``tf.distribute`` input pipelines. A ``tf.compat.v1.data.Dataset`` as in
  Reverb: in TF1-style graphs (``tf.compat.v1.Session``) it and its
  transformations offer ``make_one_shot_iterator()`` and
  ``make_initializable_iterator()`` (each initialization starts a new
  sampler). Not checkpointable (the data lives on a server).

  `server_address` may be a sharded target ("ipv4:A:P,B:Q",
  "dns:///name:port" or a list of "host:port"; docs/concepts/sharding.md): each
  worker's stream samples one shard (gRPC round_robin over the healthy
  ones; workers default to one per shard), a stream that fails reopens on
  a live shard, so the dataset keeps producing while any shard is up, and
  ``max_samples`` counts samples from all shards.

  Example:
    ```python
    import numpy as np
    import tensorflow as tf
    import tf_reverb as reverb

    server = reverb.Server(tables=[reverb.Table(
        name='replay', sampler=reverb.selectors.Uniform(),
        remover=reverb.selectors.Fifo(), max_size=100,
        rate_limiter=reverb.rate_limiters.MinSize(1),
        signature={'obs': tf.TensorSpec([2, 3], tf.float32)})],
        host='127.0.0.1')
    client = reverb.Client(f'localhost:{server.port}')
    with client.trajectory_writer(num_keep_alive_refs=2) as writer:
      for step in range(5):
        writer.append({'obs': np.full([3], step, np.float32)})
        if step >= 1:
          writer.create_item('replay', priority=1.0,
                             trajectory={'obs': writer.history['obs'][-2:]})
    dataset = reverb.TrajectoryDataset.from_table_signature(
        f'localhost:{server.port}', 'replay',
        max_in_flight_samples_per_worker=10, max_samples=8).batch(4)
    for sample in dataset:
      print(sample.data['obs'].shape)  # (4, 2, 3)
    server.stop()
    ```

  ``batch(n, drop_remainder)`` called directly on a TrajectoryDataset is
  fused into the source: items are decoded straight into the batch tensors,
  without per-item tf.data overhead or the copy ``Dataset.batch`` makes. The
  elements (and element spec) are those ``Dataset.batch`` would give; items
  of different shapes in one batch raise InvalidArgumentError as there.
  """

  _op_name = 'reverb_trajectory_dataset'

  def batch(
    self,
    batch_size: Any,
    drop_remainder: Any = False,
    num_parallel_calls: Optional[int] = None,
    deterministic: Optional[bool] = None,
    name: Optional[str] = None,
  ):
    """Batches consecutive items; fused into the source when possible.

    The fused path is taken for a Python/numpy int `batch_size` >= 1, a
    Python bool `drop_remainder` and no other options on an unbatched
    dataset; anything else falls back to ``tf.data.Dataset.batch``.
    """
    fusable = (
      isinstance(batch_size, (int, np.integer))
      and not isinstance(batch_size, bool)
      and batch_size >= 1
      and isinstance(drop_remainder, bool)
      and num_parallel_calls is None
      and deterministic is None
      and name is None
      and not self._batch_size
    )
    if not fusable:
      return super().batch(
        batch_size, drop_remainder, num_parallel_calls, deterministic, name
      )
    return TrajectoryDataset(
      server_address=self._server_address,
      table=self._table,
      dtypes=self._dtypes,
      shapes=self._shapes,
      max_in_flight_samples_per_worker=self._max_in_flight_samples_per_worker,
      num_workers_per_iterator=self._num_workers_per_iterator,
      max_samples_per_stream=self._max_samples_per_stream,
      rate_limiter_timeout_ms=self._rate_limiter_timeout_ms,
      max_samples=self._max_samples,
      _batch_size=int(batch_size),
      _drop_remainder=drop_remainder,
    )
