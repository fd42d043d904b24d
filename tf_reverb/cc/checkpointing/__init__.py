"""Reverb's ``reverb.cc.checkpointing`` package path (see tf_reverb.cc)."""
