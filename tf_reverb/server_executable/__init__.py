"""The standalone ``reverb_server`` (a C++ binary packaged with tf_reverb)."""
