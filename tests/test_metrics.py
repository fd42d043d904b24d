"""Prometheus metrics of reverb_server --metrics_port (and Server(metrics_port)):
the /metrics text itself, and a real Prometheus (Debian's `prometheus`)
scraping a running server."""

import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
import json

import numpy as np
import portpicker
import pytest

import tf_reverb as reverb
from metrics_testing import MetricsServer, scrape, wait_until

CONFIG = '''
tables {
  table_name: "replay"
  sampler { uniform: true }
  remover { fifo: true }
  max_size: 30
  rate_limiter { samples_per_insert: 1 min_size_to_sample: 1
                 min_diff: -1e9 max_diff: 1e9 }
}
tables {
  table_name: "queue"
  sampler { fifo: true }
  remover { fifo: true }
  max_size: 2
  max_times_sampled: 1
  rate_limiter { samples_per_insert: 1 min_size_to_sample: 1 min_diff: 0 max_diff: 2 }
}
'''

# Every family the exporter promises (server/metrics/collector.h).
FAMILIES = {
  'tf_reverb_table_items': 'gauge',
  'tf_reverb_table_max_size': 'gauge',
  'tf_reverb_table_episodes': 'gauge',
  'tf_reverb_table_chunks': 'gauge',
  'tf_reverb_table_chunk_stored_bytes': 'gauge',
  'tf_reverb_table_chunk_uncompressed_bytes': 'gauge',
  'tf_reverb_table_inserts_total': 'counter',
  'tf_reverb_table_samples_total': 'counter',
  'tf_reverb_table_deletes_total': 'counter',
  'tf_reverb_table_priority_updates_total': 'counter',
  'tf_reverb_table_inserted_bytes_total': 'counter',
  'tf_reverb_table_sampled_bytes_total': 'counter',
  'tf_reverb_table_rate_limiter_blocked_seconds': 'histogram',
  'tf_reverb_table_rate_limiter_blocked_callers': 'gauge',
  'tf_reverb_rpc_calls_total': 'counter',
  'tf_reverb_rpc_errors_total': 'counter',
  'tf_reverb_rpc_duration_seconds': 'histogram',
  'tf_reverb_rpc_active_calls': 'gauge',
  'tf_reverb_checkpoint_duration_seconds': 'histogram',
  'tf_reverb_checkpoint_saved_bytes_total': 'counter',
  'tf_reverb_checkpoint_last_save_bytes': 'gauge',
  'tf_reverb_checkpoint_last_success_timestamp_seconds': 'gauge',
  'tf_reverb_checkpoint_save_failures_total': 'counter',
  'tf_reverb_checkpoint_restores_total': 'counter',
  'tf_reverb_checkpoint_restore_failures_total': 'counter',
  'process_cpu_seconds_total': 'counter',
  'process_resident_memory_bytes': 'gauge',
  'process_virtual_memory_bytes': 'gauge',
  'process_start_time_seconds': 'gauge',
  'process_threads': 'gauge',
  'process_open_fds': 'gauge',
  'process_max_fds': 'gauge',
}

STEP = {'obs': np.arange(16, dtype=np.float32)}  # 64 bytes uncompressed


@pytest.fixture
def metrics_server(tmp_path):
  started = []

  def start(*args):
    server = MetricsServer(f'--config={CONFIG}', *args)
    started.append(server)
    return server

  yield start
  for server in started:
    server.kill()


def test_every_family_is_served_with_the_right_values(metrics_server, tmp_path):
  server = metrics_server(f'--checkpoint_dir={tmp_path / "ckpt"}')
  client = reverb.Client(server.address)
  before = scrape(server.metrics_port)
  for name, kind in FAMILIES.items():
    assert before.types.get(name) == kind, name
  assert before.value('tf_reverb_table_max_size', table='replay') == 30
  assert before.value('tf_reverb_table_items', table='replay') == 0

  inserts, samples = 37, 11
  for _ in range(inserts):
    client.insert(STEP, {'replay': 1.0})
  sampled = list(client.sample('replay', num_samples=samples))
  assert len(sampled) == samples
  keys = sorted({int(s[0].info.key) for s in sampled})
  # Updates of sampled keys (all present), then one delete.
  client.mutate_priorities('replay', updates={k: 2.0 for k in keys})
  client.mutate_priorities('replay', deletes=[keys[0]])
  info = client.server_info()
  after = scrape(server.metrics_port)

  def table(name):
    return after.value(name, table='replay')

  assert table('tf_reverb_table_inserts_total') == inserts
  assert table('tf_reverb_table_samples_total') == samples
  assert table('tf_reverb_table_priority_updates_total') == len(keys)
  # max_size 30: 7 evicted, then 1 deleted; each item has its own chunk.
  assert table('tf_reverb_table_deletes_total') == inserts - 30 + 1
  assert table('tf_reverb_table_items') == 29 == info['replay'].current_size
  assert table('tf_reverb_table_chunks') == 29
  assert table('tf_reverb_table_episodes') == info['replay'].num_episodes
  assert table('tf_reverb_table_chunk_uncompressed_bytes') == 29 * 64
  stored = table('tf_reverb_table_chunk_stored_bytes')
  assert 0 < stored
  # Every chunk is the same size here.
  assert table('tf_reverb_table_inserted_bytes_total') == pytest.approx(
    stored / 29 * inserts
  )
  assert table('tf_reverb_table_sampled_bytes_total') == pytest.approx(
    stored / 29 * samples
  )
  assert after.value('tf_reverb_table_inserts_total', table='queue') == 0
  # Exactly the calls made between two scrapes.
  client.server_info()
  later = scrape(server.metrics_port)
  assert (
    later.value('tf_reverb_rpc_calls_total', method='ServerInfo')
    - after.value('tf_reverb_rpc_calls_total', method='ServerInfo')
  ) == 1
  assert (
    later.value('tf_reverb_rpc_duration_seconds_count', method='ServerInfo')
    - after.value('tf_reverb_rpc_duration_seconds_count', method='ServerInfo')
  ) == 1
  assert (
    after.value('tf_reverb_rpc_calls_total', method='MutatePriorities') == 2
  )
  assert (
    after.value(
      'tf_reverb_rpc_duration_seconds_count', method='MutatePriorities'
    )
    == 2
  )
  assert (
    after.value('tf_reverb_rpc_active_calls', method='MutatePriorities') == 0
  )
  assert after.value('process_threads') > 1
  assert after.value('process_resident_memory_bytes') > 1e6
  assert abs(after.value('process_start_time_seconds') - time.time()) < 3600

  # Errors by code: an unknown table is NOT_FOUND.
  with pytest.raises(Exception, match='not found'):
    client.mutate_priorities('nope', updates={1: 1.0})
  errors = scrape(server.metrics_port)
  assert (
    errors.value(
      'tf_reverb_rpc_errors_total', method='MutatePriorities', code='NOT_FOUND'
    )
    == 1
  )

  # Checkpoints: one save, its bytes and time.
  assert errors.value('tf_reverb_checkpoint_duration_seconds_count') == 0
  client.checkpoint()
  saved = scrape(server.metrics_port)
  assert saved.value('tf_reverb_checkpoint_duration_seconds_count') == 1
  written = sum(
    os.path.getsize(os.path.join(d, f))
    for d, _, files in os.walk(tmp_path / 'ckpt')
    for f in files
  )
  assert saved.value('tf_reverb_checkpoint_last_save_bytes') == written
  assert saved.value('tf_reverb_checkpoint_saved_bytes_total') == written
  assert (
    abs(
      saved.value('tf_reverb_checkpoint_last_success_timestamp_seconds')
      - time.time()
    )
    < 600
  )
  assert saved.value('tf_reverb_checkpoint_save_failures_total') == 0
  assert server.stop() == 0

  # The restart restores it (a counted restore) with the items.
  again = metrics_server(f'--checkpoint_dir={tmp_path / "ckpt"}')
  restored = scrape(again.metrics_port)
  assert restored.value('tf_reverb_checkpoint_restores_total') == 1
  assert restored.value('tf_reverb_table_items', table='replay') == 29
  assert restored.value('tf_reverb_table_chunks', table='replay') == 29
  assert restored.value('tf_reverb_table_inserts_total', table='replay') == 0
  assert again.stop() == 0


def test_rate_limiter_blocking_is_measured(metrics_server):
  server = metrics_server()
  client = reverb.Client(server.address)
  for _ in range(2):
    client.insert(STEP, {'queue': 1.0})
  # The queue is full: a third insert waits for a sample.
  blocked = threading.Thread(target=client.insert, args=(STEP, {'queue': 1.0}))
  blocked.start()

  def insert_blocked():
    page = scrape(server.metrics_port)
    return (
      page
      if page.value(
        'tf_reverb_table_rate_limiter_blocked_callers',
        table='queue',
        operation='insert',
      )
      == 1
      else None
    )

  page = wait_until(insert_blocked, 'the insert to block')
  assert (
    page.value(
      'tf_reverb_table_rate_limiter_blocked_seconds_count',
      table='queue',
      operation='insert',
    )
    == 0
  )
  assert page.value('tf_reverb_rpc_active_calls', method='InsertStream') >= 1
  assert len(list(client.sample('queue', num_samples=1))) == 1
  blocked.join(timeout=60)
  assert not blocked.is_alive()
  page = scrape(server.metrics_port)
  assert (
    page.value(
      'tf_reverb_table_rate_limiter_blocked_callers',
      table='queue',
      operation='insert',
    )
    == 0
  )
  assert (
    page.value(
      'tf_reverb_table_rate_limiter_blocked_seconds_count',
      table='queue',
      operation='insert',
    )
    == 1
  )
  assert (
    page.value(
      'tf_reverb_table_rate_limiter_blocked_seconds_sum',
      table='queue',
      operation='insert',
    )
    > 0
  )
  assert page.value('tf_reverb_table_inserts_total', table='queue') == 3
  assert server.stop() == 0


def test_busy_metrics_port_is_a_clear_error(metrics_server):
  server = metrics_server()
  result = subprocess.run(
    [
      *server.process.args[:1],
      '--port=0',
      f'--metrics_port={server.metrics_port}',
    ],
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert result.returncode == 1
  assert 'event=error' in result.stderr
  assert f'Cannot serve metrics on {server.metrics_port}' in result.stderr
  assert server.stop() == 0


def test_python_server_serves_metrics():
  table = reverb.Table(
    't',
    reverb.selectors.Uniform(),
    reverb.selectors.Fifo(),
    max_size=10,
    rate_limiter=reverb.rate_limiters.MinSize(1),
  )
  with reverb.Server([table], metrics_port=0) as server:
    assert server.metrics_port > 0
    client = server.localhost_client()
    for _ in range(3):
      client.insert(STEP, {'t': 1.0})
    page = scrape(server.metrics_port)
    assert page.value('tf_reverb_table_inserts_total', table='t') == 3
    assert page.value('tf_reverb_table_items', table='t') == 3
  with reverb.Server([reverb.Table.queue('q', 1)]) as server:
    assert server.metrics_port is None
  with pytest.raises(ValueError, match='metrics_port'):
    reverb.Server([reverb.Table.queue('q', 1)], metrics_port=70000)


# --- a real Prometheus --------------------------------------------------------


def _prometheus_binary() -> str:
  binary = shutil.which('prometheus') or (
    '/usr/bin/prometheus' if os.access('/usr/bin/prometheus', os.X_OK) else None
  )
  if binary is None:
    reason = (
      'Debian package "prometheus" is not installed and cannot be '
      'installed here (scripts/setup.sh installs it)'
    )
    print(reason)
    pytest.skip(reason)
  return binary


class Prometheus:
  """Debian's prometheus scraping `target` every 200 ms, own storage dir."""

  def __init__(self, target: str, directory):
    self.port = portpicker.pick_unused_port()
    config = directory / 'prometheus.yml'
    config.write_text(
      'global:\n'
      '  scrape_interval: 200ms\n'
      '  scrape_timeout: 150ms\n'
      'scrape_configs:\n'
      '  - job_name: tf_reverb\n'
      '    static_configs:\n'
      f'      - targets: ["{target}"]\n'
    )
    self.log = open(directory / 'prometheus.log', 'w')
    self.process = subprocess.Popen(
      [
        _prometheus_binary(),
        f'--config.file={config}',
        f'--storage.tsdb.path={directory / "data"}',
        f'--web.listen-address=127.0.0.1:{self.port}',
        '--log.level=warn',
      ],
      stdout=self.log,
      stderr=subprocess.STDOUT,
    )
    wait_until(self._ready, 'Prometheus to be ready', attempts=1200, pause=0.1)

  def _ready(self) -> bool:
    assert self.process.poll() is None, 'prometheus exited'
    try:
      with urllib.request.urlopen(
        f'http://127.0.0.1:{self.port}/-/ready', timeout=5
      ) as response:
        return response.status == 200
    except OSError:
      return False

  def query(self, expression: str):
    """The instant vector of `expression` as [(labels, value)]."""
    url = (
      f'http://127.0.0.1:{self.port}/api/v1/query?'
      + urllib.parse.urlencode({'query': expression})
    )
    with urllib.request.urlopen(url, timeout=30) as response:
      body = json.load(response)
    assert body['status'] == 'success', body
    return [(r['metric'], float(r['value'][1])) for r in body['data']['result']]

  def stop(self) -> None:
    if self.process.poll() is None:
      self.process.send_signal(signal.SIGTERM)
      self.process.wait(timeout=120)
    self.log.close()


def test_prometheus_scrapes_what_the_test_did(metrics_server, tmp_path):
  _prometheus_binary()
  server = metrics_server()
  prometheus = Prometheus(f'127.0.0.1:{server.metrics_port}', tmp_path)
  try:
    client = reverb.Client(server.address)
    inserts, samples = 23, 9
    for _ in range(inserts):
      client.insert(STEP, {'replay': 1.0})
    assert len(list(client.sample('replay', num_samples=samples))) == samples
    done = time.time()
    selector = '{job="tf_reverb",table="replay"}'

    # Bounded by events: a scrape taken after the last operation is stored.
    def scraped_after_last_operation():
      result = prometheus.query(
        f'timestamp(tf_reverb_table_samples_total{selector})'
      )
      return result and result[0][1] > done

    wait_until(
      scraped_after_last_operation,
      'a scrape after the operations',
      attempts=1200,
      pause=0.1,
    )
    assert (
      prometheus.query(f'tf_reverb_table_inserts_total{selector}')[0][1]
      == inserts
    )
    assert (
      prometheus.query(f'tf_reverb_table_samples_total{selector}')[0][1]
      == samples
    )
    assert prometheus.query(f'tf_reverb_table_items{selector}')[0][1] == inserts
    assert prometheus.query('up{job="tf_reverb"}')[0][1] == 1
    by_method = dict(
      (r['method'], v)
      for r, v in prometheus.query('tf_reverb_rpc_calls_total{job="tf_reverb"}')
    )
    assert by_method['SampleStream'] >= 1 and by_method['InsertStream'] >= 1
  finally:
    prometheus.stop()
  assert server.stop() == 0
