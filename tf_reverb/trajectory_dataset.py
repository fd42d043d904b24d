"""``TrajectoryDataset``: one element per sampled item (reverb-spec.md §2.10).

Imports TensorFlow; reach it as ``tf_reverb.TrajectoryDataset`` (resolved on
first access).
"""

from tf_reverb import _reverb_dataset


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
  ``tf.distribute`` input pipelines. Not checkpointable (the data lives on a
  server).
  """

  _op_name = 'reverb_trajectory_dataset'
