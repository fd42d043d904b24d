"""Reverb's generated modules import from Reverb's paths, as tf_reverb's own
modules: programs built on reverb.cc.schema_pb2 & co. run unchanged."""

import os
import subprocess
import sys

from tf_reverb.proto import checkpoint_pb2 as own_checkpoint_pb2
from tf_reverb.proto import patterns_pb2 as own_patterns_pb2
from tf_reverb.proto import schema_pb2 as own_schema_pb2

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_cc_paths_are_the_package_s_own_modules():
  from tf_reverb.cc import patterns_pb2  # pylint: disable=g-import-not-at-top
  from tf_reverb.cc import schema_pb2  # pylint: disable=g-import-not-at-top
  from tf_reverb.cc.checkpointing import checkpoint_pb2  # pylint: disable=g-import-not-at-top
  from tf_reverb.server_executable import reverb_config_pb2  # pylint: disable=g-import-not-at-top

  assert schema_pb2 is own_schema_pb2
  assert patterns_pb2 is own_patterns_pb2
  assert checkpoint_pb2 is own_checkpoint_pb2
  assert (
    reverb_config_pb2.ReverbServerConfig
    is own_checkpoint_pb2.ReverbServerConfig
  )
  for name in (
    'TableInfo',
    'KeyDistributionOptions',
    'RateLimiterInfo',
    'ChunkData',
    'FlatTrajectory',
    'PrioritizedItem',
    'SampleInfo',
  ):
    assert hasattr(schema_pb2, name), name
  for name in ('PriorityTableCheckpoint', 'RateLimiterCheckpoint'):
    assert hasattr(checkpoint_pb2, name), name
  for name in ('PatternNode', 'Condition', 'StructuredWriterConfig'):
    assert hasattr(patterns_pb2, name), name


# A Reverb program: tables built from Reverb's proto paths, under `reverb`.
PROGRAM = r'''
import reverb
from reverb.cc import schema_pb2
from reverb.cc.checkpointing import checkpoint_pb2
from reverb.cc import patterns_pb2
from reverb.server_executable import server_from_proto

config = checkpoint_pb2.PriorityTableCheckpoint(
    table_name='from_proto', max_size=10, max_times_sampled=0,
    sampler=schema_pb2.KeyDistributionOptions(uniform=True),
    remover=schema_pb2.KeyDistributionOptions(fifo=True),
    rate_limiter=checkpoint_pb2.RateLimiterCheckpoint(
        samples_per_insert=1.0, min_size_to_sample=1,
        min_diff=-1e9, max_diff=1e9))
tables = server_from_proto.tables_from_proto([config])
server = reverb.Server(tables, port=None)
client = reverb.Client(f'localhost:{server.port}')
client.insert([1.0], {'from_proto': 1.0})
info = client.server_info()['from_proto']
assert isinstance(info.rate_limiter_info, schema_pb2.RateLimiterInfo), type(info.rate_limiter_info)
assert info.current_size == 1, info
node = patterns_pb2.PatternNode(flat_source_index=0)
print('ok', info.current_size, node.flat_source_index)
server.stop()
'''


def test_a_reverb_program_on_reverb_s_proto_paths_runs_unchanged():
  env = dict(os.environ, TF_REVERB_AS_REVERB='1')
  result = subprocess.run(
    [sys.executable, '-c', PROGRAM],
    env=env,
    capture_output=True,
    text=True,
    timeout=120,
    cwd=ROOT,
  )
  assert result.returncode == 0, result.stderr
  assert result.stdout.split() == ['ok', '1', '0']
