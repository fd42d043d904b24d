"""A client in another process writing to and sampling from our server."""

from conftest import run_python


def test_client_in_a_separate_process(server):
  code = f'''
import numpy as np
import tf_reverb as reverb
client = reverb.Client('localhost:{server.port}')
for i in range(10):
  client.insert({{'x': np.full(3, i, np.int32)}}, {{'my_table': float(i + 1)}})
seen = set()
for sample in client.sample('my_table', 50, emit_timesteps=False):
  seen.add(int(sample.data[0][0, 0]))
assert seen <= set(range(10)) and len(seen) > 1, seen
print('sampled', len(seen))
'''
  assert 'sampled' in run_python(code).stdout
  table_info = [t for t in server._tables][0].info  # pylint: disable=protected-access
  assert table_info.current_size == 10
  assert table_info.rate_limiter_info.sample_stats.completed == 50
