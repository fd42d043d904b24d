"""The root BUILD names the product's targets, and //:tests holds every C++
test of the tree (so a new cc_test cannot be left out of it)."""

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _query(expression):
  result = subprocess.run(
    ['bazel', 'query', '--noshow_progress', expression],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert result.returncode == 0, result.stderr
  return set(result.stdout.split())


def test_root_targets_and_test_suite_cover_the_tree():
  assert {
    '//:reverb_server',
    '//:core',
    '//:kernels',
    '//:pybind',
    '//:tests',
  } <= _query('//:all')
  assert _query('deps(//:reverb_server, 1)') >= {
    '//server/service:reverb_server'
  }
  every_cc_test = _query('kind(cc_test, //...)')
  assert len(every_cc_test) > 20
  assert _query('tests(//:tests)') == every_cc_test


def test_the_client_side_never_links_the_service():
  # The client, the sampler and the writers reach the tables of this
  # process's servers through //server:in_process_tables, not through the
  # gRPC service, its reactors, the checkpointer or the metrics exporter.
  client_side = 'kind(cc_library, //server/client:* + //server/writer:* + //server/patterns:*)'
  assert _query(f'deps({client_side})'), 'no client-side libraries found'
  assert _query(f'deps({client_side}) intersect //server/service:*') == set()
  # The service does not link the client either; only the core joins them.
  assert (
    _query(
      'deps(kind(cc_library, //server/service:*)) intersect //server/client:*'
    )
    == set()
  )
  assert _query(
    'deps(//server/c_api:core) intersect //server/service:service'
  ) == {'//server/service:service'}
