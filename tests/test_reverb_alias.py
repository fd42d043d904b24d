"""`tf_reverb.install_as_reverb()` and TF_REVERB_AS_REVERB: `import reverb` on
tf_reverb, in the process and in spawned children, never silently over a real
dm-reverb. Each case runs in a fresh interpreter (the alias is process-wide).
"""

import os
import subprocess
import sys
import textwrap

import pytest

# A program written for Reverb: the worker module imports `reverb` at its top,
# so a spawned child can only import it if the alias reaches the child at
# start-up (the main module installs the alias under __main__ only).
_WORKER = '''
import reverb
import reverb.trajectory_writer
from reverb import structured_writer


def write_and_report(address, queue):
  client = reverb.Client(address)
  with client.trajectory_writer(num_keep_alive_refs=1) as writer:
    writer.append({'x': 7})
    writer.create_item('t', 1.0, {'x': writer.history['x'][-1]})
  queue.put((reverb.__name__,
             reverb.trajectory_writer.TrajectoryWriter.__module__,
             structured_writer.__name__,
             reverb.Client(address).server_info()['t'].current_size))
'''

_MAIN = '''
import multiprocessing
import sys

if __name__ == '__main__':
  import tf_reverb
  tf_reverb.install_as_reverb()
  import reverb
  import reverb.trajectory_writer
  import worker

  assert reverb is tf_reverb
  assert reverb.trajectory_writer is sys.modules['tf_reverb.trajectory_writer']
  assert reverb.trajectory_writer.TrajectoryWriter is tf_reverb.TrajectoryWriter
  assert 'tensorflow' not in sys.modules
  server = reverb.Server([reverb.Table(
      't', reverb.selectors.Uniform(), reverb.selectors.Fifo(), 10,
      reverb.rate_limiters.MinSize(1))])
  address = f'localhost:{server.port}'
  context = multiprocessing.get_context('spawn')
  queue = context.Queue()
  child = context.Process(target=worker.write_and_report, args=(address, queue))
  child.start()
  result = queue.get()
  child.join()
  assert child.exitcode == 0, child.exitcode
  print('child', *result)
  sample = next(reverb.Client(address).sample('t', emit_timesteps=False))
  print('parent sampled', int(sample.data[0]))
'''


def _run(tmp_path, code, env_extra=None, extra_path=()):
  env = dict(os.environ)
  env.pop('TF_REVERB_AS_REVERB', None)
  env['PYTHONPATH'] = os.pathsep.join([str(tmp_path), *extra_path])
  env.update(env_extra or {})
  script = tmp_path / 'program.py'
  script.write_text(textwrap.dedent(code))
  return subprocess.run(
    [sys.executable, str(script)],
    cwd=tmp_path,
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
  )


def _fake_dm_reverb(tmp_path):
  """A directory holding a package named `reverb` (stands in for dm-reverb)."""
  site = tmp_path / 'fake_site'
  (site / 'reverb').mkdir(parents=True)
  (site / 'reverb' / '__init__.py').write_text("IS_FAKE_DM_REVERB = True\n")
  return str(site)


def test_import_reverb_in_parent_and_spawned_child(tmp_path):
  (tmp_path / 'worker.py').write_text(_WORKER)
  result = _run(tmp_path, _MAIN)
  assert result.returncode == 0, result.stderr
  lines = result.stdout.splitlines()
  assert (
    'child tf_reverb tf_reverb.trajectory_writer tf_reverb.structured_writer 1'
  ) in lines
  assert 'parent sampled 7' in lines


def test_environment_variable_alone_reaches_a_fresh_interpreter(tmp_path):
  code = '''
  import sys
  assert 'tf_reverb' not in sys.modules   # the hook imports nothing up front
  import reverb
  from reverb import structured_writer
  import tf_reverb
  print(reverb is tf_reverb, structured_writer is tf_reverb.structured,
        'tensorflow' in sys.modules)
  '''
  result = _run(tmp_path, code, {'TF_REVERB_AS_REVERB': '1'})
  assert result.returncode == 0, result.stderr
  assert result.stdout.split() == ['True', 'True', 'False']


def test_without_opt_in_import_reverb_is_untouched(tmp_path):
  code = '''
  import tf_reverb
  try:
    import reverb
  except ModuleNotFoundError as e:
    print('not found', e.name)
  else:
    print('found', reverb.__name__)
  '''
  result = _run(tmp_path, code)
  assert result.returncode == 0, result.stderr
  # dm-reverb may live in another venv, never in ours.
  assert result.stdout.split() == ['not', 'found', 'reverb']


def test_unknown_submodule_names_both_modules(tmp_path):
  code = '''
  import tf_reverb
  tf_reverb.install_as_reverb()
  try:
    import reverb.no_such_module
  except ModuleNotFoundError as e:
    print(e.name, '|', e)
  '''
  result = _run(tmp_path, code)
  assert result.returncode == 0, result.stderr
  name, message = result.stdout.strip().split(' | ')
  assert name == 'reverb.no_such_module'
  assert "'tf_reverb.no_such_module'" in message


def test_refuses_to_shadow_an_installed_dm_reverb(tmp_path):
  site = _fake_dm_reverb(tmp_path)
  code = '''
  import tf_reverb
  try:
    tf_reverb.install_as_reverb()
  except RuntimeError as e:
    print('refused:', e)
  import reverb
  print('after refusal:', getattr(reverb, 'IS_FAKE_DM_REVERB', False))
  tf_reverb.install_as_reverb(replace_dm_reverb=True)
  import reverb
  print('replaced:', reverb is tf_reverb)
  '''
  result = _run(tmp_path, code, extra_path=[site])
  assert result.returncode == 0, result.stderr
  lines = result.stdout.splitlines()
  assert lines[0].startswith('refused:') and site in lines[0]
  assert 'replace_dm_reverb=True' in lines[0]
  assert lines[1] == 'after refusal: True'
  assert lines[2] == 'replaced: True'


def test_refuses_when_dm_reverb_was_already_imported(tmp_path):
  site = _fake_dm_reverb(tmp_path)
  code = '''
  import reverb
  import tf_reverb
  try:
    tf_reverb.install_as_reverb(replace_dm_reverb=False)
  except RuntimeError as e:
    print('refused', 'already imported' in str(e))
  '''
  result = _run(tmp_path, code, extra_path=[site])
  assert result.returncode == 0, result.stderr
  assert result.stdout.split() == ['refused', 'True']


@pytest.mark.parametrize(
  'value,expected',
  [
    ('1', 'ImportError'),
    ('replace', 'tf_reverb'),
  ],
)
def test_environment_variable_with_dm_reverb_installed(
  tmp_path, value, expected
):
  site = _fake_dm_reverb(tmp_path)
  code = '''
  try:
    import reverb
  except ImportError as e:
    print('ImportError', 'TF_REVERB_AS_REVERB=replace' in str(e))
  else:
    print(reverb.__name__, True)
  '''
  result = _run(
    tmp_path, code, {'TF_REVERB_AS_REVERB': value}, extra_path=[site]
  )
  assert result.returncode == 0, result.stderr
  assert result.stdout.split() == [expected, 'True']
