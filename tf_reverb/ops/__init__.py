"""TensorFlow ops of tf_reverb (imports TensorFlow)."""

from tf_reverb.ops.reverb_ops import reverb_client
from tf_reverb.ops.reverb_ops import reverb_client_insert
from tf_reverb.ops.reverb_ops import reverb_client_sample
from tf_reverb.ops.reverb_ops import reverb_client_update_priorities
