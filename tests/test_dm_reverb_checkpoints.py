"""Checkpoints cross between dm-reverb 0.14 and tf_reverb in both directions.

dm-reverb writes its checkpoint files as ZLIB-compressed TFRecords; tf_reverb
writes them uncompressed and reads both. Each test restores a checkpoint and
compares what every table then holds (tests/interop/checkpoint_tables.py:
info and limiter counters, signature, and items as sampling shows them: keys,
data byte for byte, priorities, times sampled, FIFO/LIFO/heap order) with
what the writing side held. tests/data/dm_reverb_checkpoint/ is a checkpoint
dm-reverb wrote (its README says how), so the restore is tested where
dm-reverb cannot be installed too.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

import tf_reverb as reverb
from conftest import DM_PYTHON
from conftest import requires_dm_reverb

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, 'interop'))
import checkpoint_tables  # pylint: disable=g-import-not-at-top,wrong-import-position

SCRIPT = os.path.join(HERE, 'interop', 'dm_reverb_checkpoint.py')
FIXTURE = os.path.join(HERE, 'data', 'dm_reverb_checkpoint')


def _server(directory):
  tables = checkpoint_tables.tables(reverb)
  server = reverb.Server(
    tables,
    checkpointer=reverb.checkpointers.DefaultCheckpointer(path=str(directory)),
  )
  return server, [table.name for table in tables]


def _restored_state(directory):
  server, names = _server(directory)
  with server:
    return checkpoint_tables.dump(
      reverb.Client(f'localhost:{server.port}'), names
    )


def _assert_same_state(restored, written):
  assert sorted(restored) == sorted(written)
  for name in written:
    assert restored[name]['info'] == written[name]['info'], name
    if 'next' in written[name]:
      assert restored[name]['next'] == written[name]['next'], name
    else:
      assert restored[name]['items'] == written[name]['items'], name


def _run_dm(mode, directory, state_path):
  result = subprocess.run(
    [DM_PYTHON, SCRIPT, mode, str(directory), str(state_path)],
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  with open(state_path) as f:
    return json.load(f)


def _checkpoint_files(root):
  (latest,) = [
    os.path.join(root, d)
    for d in os.listdir(root)
    if os.path.isdir(os.path.join(root, d))
  ]
  return latest


def test_the_committed_dm_reverb_checkpoint_restores_completely(tmp_path):
  shutil.copytree(
    os.path.join(FIXTURE, 'checkpoints'), tmp_path / 'checkpoints'
  )
  with open(os.path.join(FIXTURE, 'state.json')) as f:
    written = json.load(f)
  # It is dm-reverb's format: compressed, which tf_reverb never writes.
  with open(
    os.path.join(
      _checkpoint_files(tmp_path / 'checkpoints'), 'tables.tfrecord'
    ),
    'rb',
  ) as f:
    assert f.read(1) == b'\x78'
  restored = _restored_state(tmp_path / 'checkpoints')
  _assert_same_state(restored, written)
  # Every selector and rate limiter, evictions and removals included.
  assert restored['uniform']['info']['current_size'] == 4
  assert restored['queue']['info']['current_size'] == 4
  assert restored['fifo']['info']['signature'] == {
    'a': [[2], 'int64'],
    'obs': [[2, 3], 'float32'],
  }
  assert restored['fifo']['next'][0]['times_sampled'] == 3


@pytest.mark.parametrize('damage', ['truncated', 'corrupt'])
def test_a_damaged_compressed_checkpoint_names_the_file(tmp_path, damage):
  shutil.copytree(
    os.path.join(FIXTURE, 'checkpoints'), tmp_path / 'checkpoints'
  )
  items = os.path.join(
    _checkpoint_files(tmp_path / 'checkpoints'), 'chunks.tfrecord'
  )
  with open(items, 'rb') as f:
    data = f.read()
  if damage == 'truncated':
    data = data[: len(data) - 7]
  else:
    middle = len(data) // 2
    data = data[:middle] + bytes([data[middle] ^ 0x5A]) + data[middle + 1 :]
  with open(items, 'wb') as f:
    f.write(data)
  with pytest.raises(RuntimeError, match='chunks.tfrecord'):
    _server(tmp_path / 'checkpoints')


@requires_dm_reverb
def test_a_checkpoint_dm_reverb_writes_now_restores_completely(tmp_path):
  written = _run_dm('write', tmp_path / 'dm', tmp_path / 'dm.json')
  _assert_same_state(_restored_state(tmp_path / 'dm'), written)


@requires_dm_reverb
def test_dm_reverb_restores_a_tf_reverb_checkpoint_completely(tmp_path):
  server, names = _server(tmp_path / 'ours')
  with server:
    client = reverb.Client(f'localhost:{server.port}')
    checkpoint_tables.fill(client, names)
    client.checkpoint()
    written = checkpoint_tables.dump(client, names)
  _assert_same_state(
    _run_dm('restore', tmp_path / 'ours', tmp_path / 'dm.json'), written
  )


def test_the_server_binary_restores_the_dm_reverb_checkpoint(
  binary_server, tmp_path
):
  shutil.copytree(
    os.path.join(FIXTURE, 'checkpoints'), tmp_path / 'checkpoints'
  )
  with open(os.path.join(FIXTURE, 'state.json')) as f:
    written = json.load(f)
  names = [table.name for table in checkpoint_tables.tables(reverb)]
  # Placeholder definitions: the checkpoint's own settings are restored.
  config = ' '.join(
    f'tables {{ table_name: "{name}" max_size: 1 sampler {{ uniform: true }} '
    'remover { fifo: true } rate_limiter { samples_per_insert: 1 '
    'min_size_to_sample: 1 min_diff: -1e9 max_diff: 1e9 } }'
    for name in names
  )
  server = binary_server(
    '--port=0',
    f'--config={config}',
    f'--checkpoint_dir={tmp_path / "checkpoints"}',
  )
  restored = checkpoint_tables.dump(reverb.Client(server.address), names)
  _assert_same_state(restored, written)
