"""The version of tf_reverb, in one place.

``tf_reverb.__version__`` is this value, and setup.py reads it from this file
(parsing, not importing: importing tf_reverb needs its native core, which the
build has not made yet). Change the version here only.
"""

__version__ = '0.1.0'
