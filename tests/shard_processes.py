"""reverb_server binaries run as shards on loopback, for sharding tests and
benchmarks/sharding.py.

Each ``ShardProcess`` is one server process; its output is drained by a
thread (a full pipe would block the server). Processes are ended by pid.
"""

import os
import re
import signal
import subprocess
import threading
import time
from typing import List, Optional, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER_BINARY = os.path.join(ROOT, 'tf_reverb', 'bin', 'reverb_server')

# The tables every shard serves: a queue drained to list a shard's items
# exactly once, a uniform replay table, and a max-heap whose top item shows
# priority updates.
_MIN_SIZE_1 = (
  'rate_limiter { samples_per_insert: 1 min_size_to_sample: 1 '
  'min_diff: -1e9 max_diff: 1e9 }'
)
SHARD_CONFIG = f'''
tables {{ table_name: "queue" sampler {{ fifo: true }} remover {{ fifo: true }}
         max_size: 1000000 max_times_sampled: 1 {_MIN_SIZE_1} }}
tables {{ table_name: "replay" sampler {{ uniform: true }} remover {{ fifo: true }}
         max_size: 1000000 {_MIN_SIZE_1} }}
tables {{ table_name: "heap" sampler {{ heap {{ min_heap: false }} }}
         remover {{ fifo: true }} max_size: 1000000 {_MIN_SIZE_1} }}
'''


class ShardProcess:
  """One reverb_server process listening on 127.0.0.1:`port` (0: any)."""

  def __init__(
    self,
    port: int = 0,
    checkpoint_dir: Optional[str] = None,
    config: str = SHARD_CONFIG,
    extra_args: Sequence[str] = (),
  ):
    args = [SERVER_BINARY, f'--config={config}', f'--port={port}']
    if checkpoint_dir:
      args.append(f'--checkpoint_dir={checkpoint_dir}')
    args.extend(extra_args)
    self.checkpoint_dir = checkpoint_dir
    self.process = subprocess.Popen(
      args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    self.lines: List[str] = []
    self.port = -1
    started = threading.Event()

    def drain():
      for line in self.process.stdout:
        self.lines.append(line)
        match = re.search(r'event=started port=(\d+)', line)
        if match:
          self.port = int(match.group(1))
          started.set()
      started.set()

    self._drainer = threading.Thread(target=drain, daemon=True)
    self._drainer.start()
    # A hang guard only: the server reports its port as soon as it listens.
    if not started.wait(120) or self.port < 0:
      self.kill()
      raise AssertionError(
        'reverb_server did not start:\n' + ''.join(self.lines)
      )

  @property
  def pid(self) -> int:
    return self.process.pid

  @property
  def address(self) -> str:
    return f'127.0.0.1:{self.port}'

  def alive(self) -> bool:
    return self.process.poll() is None

  def signal(self, sig: int) -> None:
    os.kill(self.pid, sig)

  def stop_and_wait(self) -> None:
    """SIGSTOP, then wait until every thread of the process is stopped."""
    os.kill(self.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 60  # a hang guard only
    while time.monotonic() < deadline:
      states = []
      for task in os.listdir(f'/proc/{self.pid}/task'):
        try:
          with open(f'/proc/{self.pid}/task/{task}/stat') as f:
            # "pid (comm) S ...": the state follows the last ')'.
            states.append(f.read().rsplit(')', 1)[1].split()[0])
        except FileNotFoundError:
          pass  # a thread that ended
      if states and all(state in ('T', 't') for state in states):
        return
      time.sleep(0.001)
    raise AssertionError(f'reverb_server {self.pid} did not stop')

  def kill(self) -> None:
    """SIGKILL by pid and reap."""
    if self.process.poll() is None:
      os.kill(self.pid, signal.SIGKILL)
    self.process.wait(60)
    self._drainer.join(60)


def ipv4_target(shards: List[ShardProcess]) -> str:
  return 'ipv4:' + ','.join(shard.address for shard in shards)
