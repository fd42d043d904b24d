"""``TimestepDataset``: one element per timestep (docs/concepts/datasets.md).

Imports TensorFlow; reach it as ``tf_reverb.TimestepDataset`` (resolved on
first access).
"""

from tf_reverb import _reverb_dataset

__all__ = ['TimestepDataset']


class TimestepDataset(_reverb_dataset.ReverbDatasetBase):
  """A tf.data source of the timesteps of sampled items.

  `dtypes`/`shapes` describe ONE timestep. Every sampled item yields one
  element per row of its columns, all sharing the item's ``SampleInfo``;
  there is no end-of-item marker. Items whose columns differ in length (or
  are squeezed) raise InvalidArgumentError ("Sampled trajectory cannot be
  decomposed into timesteps."). Rows are handed out as slices of tensors the
  item was decompressed into, without copies. Options, and the
  ``tf.compat.v1.data.Dataset`` iterators of TF1-style graphs, and sharded
  targets (docs/concepts/sharding.md), as for ``TrajectoryDataset``.
  """

  _op_name = 'reverb_timestep_dataset'
