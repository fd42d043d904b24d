"""deploy/grafana/tf_reverb.json: valid Grafana JSON whose every query names
metrics the exporter really serves."""

import json
import os
import re

from conftest import ROOT
from metrics_testing import MetricsServer, scrape

DASHBOARD = os.path.join(ROOT, 'deploy', 'grafana', 'tf_reverb.json')
# Metric names in PromQL: ours and the process_* ones.
_METRIC = re.compile(r'\b((?:tf_reverb|process)_[a-zA-Z0-9_]+)')
_HISTOGRAM_SERIES = ('_bucket', '_sum', '_count')


def _panels(dashboard):
  for panel in dashboard['panels']:
    yield panel
    yield from panel.get('panels', [])


def test_dashboard_is_valid_and_covers_what_operators_watch():
  with open(DASHBOARD) as f:
    dashboard = json.load(f)
  assert dashboard['title'] == 'tf_reverb' and dashboard['uid']
  panels = list(_panels(dashboard))
  ids = [p['id'] for p in panels]
  assert len(ids) == len(set(ids))
  exprs = [t['expr'] for p in panels for t in p.get('targets', [])]
  assert exprs and all(e.strip() for e in exprs)
  for panel in panels:
    grid = panel['gridPos']
    assert grid['x'] + grid['w'] <= 24
  # The list: fill, insert/sample rates, blocking, RPC errors and
  # latency, checkpoint age.
  joined = '\n'.join(exprs)
  for needle in (
    'tf_reverb_table_items',
    'tf_reverb_table_max_size',
    'rate(tf_reverb_table_inserts_total',
    'rate(tf_reverb_table_samples_total',
    'tf_reverb_table_rate_limiter_blocked_seconds',
    'tf_reverb_rpc_errors_total',
    'tf_reverb_rpc_duration_seconds_bucket',
    'time() - (tf_reverb_checkpoint_last_success_timestamp_seconds',
  ):
    assert needle in joined, needle


def test_every_queried_metric_is_exported(tmp_path):
  with open(DASHBOARD) as f:
    dashboard = json.load(f)
  queries = [
    t['expr'] for p in _panels(dashboard) for t in p.get('targets', [])
  ]
  queries += [v['definition'] for v in dashboard['templating']['list']]
  server = MetricsServer(f'--checkpoint_dir={tmp_path}')
  try:
    page = scrape(server.metrics_port)
  finally:
    assert server.stop() == 0
  exported = set(page.types)
  missing = []
  for query in queries:
    for name in _METRIC.findall(query):
      family = name
      for suffix in _HISTOGRAM_SERIES:
        if name.endswith(suffix) and name[: -len(suffix)] in exported:
          family = name[: -len(suffix)]
          assert page.types[family] == 'histogram', name
      if family not in exported:
        missing.append((name, query))
  assert not missing, missing
