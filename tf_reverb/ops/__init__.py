"""TensorFlow ops of tf_reverb (imports TensorFlow)."""

from tf_reverb.ops.reverb_ops import reverb_client  # noqa: F401
from tf_reverb.ops.reverb_ops import reverb_client_insert  # noqa: F401
from tf_reverb.ops.reverb_ops import reverb_client_sample  # noqa: F401
from tf_reverb.ops.reverb_ops import reverb_client_update_priorities  # noqa: F401

# The raw ops are the plumbing of TFClient, the datasets and
# TFStructuredWriter, which are the API; `import *` binds none of them.
__all__ = []
