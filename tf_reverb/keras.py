"""Keras-compatible writers (``tf_reverb.keras``): the insert layer and the
learner -> actors weight channel. Imports TensorFlow."""

from tf_reverb.keras_callbacks import load_latest_weights
from tf_reverb.keras_callbacks import weights_table
from tf_reverb.keras_callbacks import WeightsPublisher
from tf_reverb.keras_layers import InsertLayer

__all__ = [
  'InsertLayer',
  'WeightsPublisher',
  'load_latest_weights',
  'weights_table',
]
