"""deploy/kubernetes/: the manifests validate against Kubernetes' schemas
(kubernetes-validate, strict: unknown fields fail) and fit together; the
ConfigMap's server config starts the real reverb_server with the
StatefulSet's flags and answers the health check its probes use."""

import os
import re
import signal
import subprocess

import grpc
import pytest
import yaml

from conftest import ROOT
from conftest import SERVER_BINARY

kubernetes_validate = pytest.importorskip(
  'kubernetes_validate',
  reason='kubernetes-validate is not installed (scripts/setup.sh installs it)',
)

DEPLOY = os.path.join(ROOT, 'deploy', 'kubernetes')
# Native gRPC probes are GA since Kubernetes 1.27; validate against it and the
# newest schemas the validator ships.
VERSIONS = ('1.27.0', kubernetes_validate.latest_version())


def _resources():
  with open(os.path.join(DEPLOY, 'kustomization.yaml')) as f:
    files = yaml.safe_load(f)['resources']
  resources = {}
  for name in files:
    with open(os.path.join(DEPLOY, name)) as f:
      for resource in yaml.safe_load_all(f):
        resources[resource['kind']] = resource
  return resources


@pytest.mark.parametrize('version', VERSIONS)
def test_manifests_validate(version):
  resources = _resources()
  assert set(resources) == {'ConfigMap', 'Service', 'StatefulSet'}
  for resource in resources.values():
    kubernetes_validate.validate(resource, version, strict=True)


def test_manifests_fit_together():
  r = _resources()
  service, stateful_set = r['Service'], r['StatefulSet']
  assert service['spec']['clusterIP'] == 'None'  # headless: one A record a pod
  assert stateful_set['spec']['serviceName'] == service['metadata']['name']
  labels = stateful_set['spec']['template']['metadata']['labels']
  assert service['spec']['selector'].items() <= labels.items()
  assert (
    stateful_set['spec']['selector']['matchLabels'].items() <= labels.items()
  )
  (container,) = stateful_set['spec']['template']['spec']['containers']
  port = int(
    next(a for a in container['args'] if a.startswith('--port=')).split('=')[1]
  )
  assert container['ports'][0]['containerPort'] == port
  assert (
    service['spec']['ports'][0]['targetPort'] == container['ports'][0]['name']
  )
  for probe in ('readinessProbe', 'livenessProbe', 'startupProbe'):
    assert container[probe]['grpc']['port'] == port
  # Checkpoints on the pod's own claim.
  (claim,) = stateful_set['spec']['volumeClaimTemplates']
  mounts = {m['name']: m['mountPath'] for m in container['volumeMounts']}
  checkpoint_dir = next(
    a for a in container['args'] if a.startswith('--checkpoint_dir=')
  ).split('=')[1]
  assert checkpoint_dir.startswith(mounts[claim['metadata']['name']] + '/')
  # The write-ahead log on the same claim, apart from the checkpoints.
  wal_dir = next(
    a for a in container['args'] if a.startswith('--wal_dir=')
  ).split('=')[1]
  assert wal_dir.startswith(mounts[claim['metadata']['name']] + '/')
  assert not wal_dir.startswith(checkpoint_dir)
  config_file = next(
    a for a in container['args'] if a.startswith('--config_file=')
  ).split('=')[1]
  assert os.path.dirname(config_file) == mounts['config']
  assert os.path.basename(config_file) in r['ConfigMap']['data']


def test_config_starts_the_server_and_it_answers_the_probe(tmp_path):
  r = _resources()
  (container,) = r['StatefulSet']['spec']['template']['spec']['containers']
  ((name, text),) = r['ConfigMap']['data'].items()
  (tmp_path / name).write_text(text)
  args = [
    a
    for a in container['args']
    if not a.startswith(
      ('--config_file=', '--port=', '--checkpoint_dir=', '--wal_dir=')
    )
  ]
  server = subprocess.Popen(
    [
      SERVER_BINARY,
      f'--config_file={tmp_path / name}',
      '--port=0',
      f'--checkpoint_dir={tmp_path / "checkpoints"}',
      f'--wal_dir={tmp_path / "wal"}',
      *args,
    ],
    stderr=subprocess.PIPE,
    text=True,
  )
  try:
    port = None
    for line in server.stderr:
      match = re.search(r'event=started port=(\d+)', line)
      if match:
        port = int(match.group(1))
        break
    assert port, 'reverb_server did not start with the ConfigMap\'s config'
    # What the kubelet's grpc probe sends: Check with service "".
    with grpc.insecure_channel(f'localhost:{port}') as channel:
      check = channel.unary_unary(
        '/grpc.health.v1.Health/Check',
        request_serializer=lambda _: b'',
        response_deserializer=lambda data: data,
      )
      assert check(None, timeout=60) == b'\x08\x01'  # status: SERVING
    import tf_reverb as reverb  # pylint: disable=g-import-not-at-top

    assert 'replay' in reverb.Client(f'localhost:{port}').server_info(60)
  finally:
    server.send_signal(signal.SIGTERM)
    server.communicate(timeout=120)
  assert server.returncode == 0
