"""The reverb_server log: one line per event that matters, never per item;
--log_format=json writes each as one JSON object."""

import json
import re

import numpy as np
import pytest

import tf_reverb as reverb
from metrics_testing import MetricsServer

STEP = {'obs': np.arange(4, dtype=np.float32)}
ITEMS = 300


def _events(lines):
  return [json.loads(line) for line in lines]


def test_json_log_has_the_events_and_nothing_per_item(tmp_path):
  server = MetricsServer('--log_format=json', f'--checkpoint_dir={tmp_path}')
  client = reverb.Client(server.address)
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    for _ in range(ITEMS):
      writer.append(STEP)
      writer.create_item('my_table', 1.0, {'obs': writer.history['obs'][-1:]})
  for _ in range(ITEMS):
    client.insert(STEP, {'my_table': 1.0})
  assert len(list(client.sample('my_table', num_samples=ITEMS))) == ITEMS
  with pytest.raises(Exception, match='nope'):
    client.insert(STEP, {'nope': 1.0})
  client.checkpoint()
  assert server.stop() == 0

  events = _events(server.lines)  # every line is one JSON object
  for event in events:
    assert re.fullmatch(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z', event['ts'])
    assert event['component'] and event['event']
  names = [e['event'] for e in events]
  assert names[0] == 'table' and events[0]['name'] == 'my_table'
  started = events[names.index('started')]
  assert (
    started['port'] == server.port
    and started['metrics_port'] == server.metrics_port
  )
  assert started['log_format'] == 'json' and started['checkpoint_dir'] == str(
    tmp_path
  )
  assert (
    isinstance(started['port'], int) and started['checkpoint_on_exit'] is True
  )
  assert names.count('saved') == 2  # the Checkpoint call and the exit
  assert 'checkpointed' in names and names[-1] == 'stopped'
  error = events[names.index('rpc_error')]
  assert error['code'] == 'NOT_FOUND' and 'nope' in error['message']
  assert re.match(r'ipv[46]:', error['peer']), error
  # Nothing per item: 900 operations, a bounded number of lines.
  assert len(events) < 20, names


def test_restart_logs_the_restored_checkpoint(tmp_path):
  server = MetricsServer(f'--checkpoint_dir={tmp_path}')
  client = reverb.Client(server.address)
  for _ in range(5):
    client.insert(STEP, {'my_table': 1.0})
  assert server.stop() == 0
  again = MetricsServer(f'--checkpoint_dir={tmp_path}')
  assert again.stop() == 0
  loaded = [
    l for l in again.lines if 'component=checkpointer event=loaded ' in l
  ]
  assert len(loaded) == 1 and ' items=5 ' in loaded[0]
  # Text lines: `ts=... component=... event=...`, one per event.
  assert all(l.startswith('ts=') and ' component=' in l for l in again.lines)


def test_client_summary_reports_open_streams():
  # A zero interval logs a summary whenever a call starts or ends.
  server = MetricsServer('--client_summary_seconds=0', '--log_format=json')
  client = reverb.Client(server.address)
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    writer.append(STEP)
    writer.create_item('my_table', 1.0, {'obs': writer.history['obs'][-1:]})
    writer.flush()
    client.server_info()  # starts while the insert stream is open
  assert server.stop() == 0
  summaries = [e for e in _events(server.lines) if e['event'] == 'clients']
  assert summaries
  assert any(
    s['insert_streams'] == 1 and s['client_addresses'] >= 1 for s in summaries
  )
  assert all(
    {
      'sample_streams',
      'active_calls',
      'calls',
      'failed_calls',
      'errors_not_logged',
    }
    <= set(s)
    for s in summaries
  )


def test_bad_log_format_is_a_clear_error():
  import subprocess
  from conftest import SERVER_BINARY

  result = subprocess.run(
    [SERVER_BINARY, '--log_format=xml'],
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert result.returncode == 1
  assert (
    'event=error' in result.stderr
    and '--log_format must be text or json' in result.stderr
  )
