"""A write-ahead log loses no confirmed insert when its server is SIGKILLed.

Writers record every item the server confirmed (a flush returned); the
server is SIGKILLed at seeded points while they write (counted in confirmed
items, never in time) and restarted on the same --wal_dir/--checkpoint_dir.
At the end the FIFO table is drained: every confirmed item is back, once,
with its data, its priority (as last updated) and its times sampled, in
insertion order per writer; deleted items stay deleted; nothing appears
twice. Some rounds checkpoint before the kill, so recovery also runs from a
checkpoint plus the log after it.
"""

import random
import signal
import subprocess
import sys
import threading
from typing import Dict, List, Set, Tuple

import numpy as np
import pytest

import tf_reverb as reverb
from shard_processes import ShardProcess

# FIFO sampling with max_times_sampled 2: a drain sees every item (twice
# when it was not sampled before), the first time with its times sampled.
CONFIG = '''
tables { table_name: "queue" sampler { fifo: true } remover { fifo: true }
         max_size: 1000000 max_times_sampled: 2
         rate_limiter { samples_per_insert: 1 min_size_to_sample: 1
                        min_diff: -1e9 max_diff: 1e9 } }
'''
WRITERS = 4
ITEMS_PER_FLUSH = 5

Item = Tuple[int, int, int]  # (round, writer, index)


def _priority(item: Item) -> float:
  kill_round, writer, index = item
  return 1.0 + kill_round * 1000 + writer * 100 + index % 97


class _Writers:
  """WRITERS threads writing ITEMS_PER_FLUSH items a flush until the server
  dies; `confirmed` holds every item a returned flush covered."""

  def __init__(self, address: str, kill_round: int):
    self.confirmed: Set[Item] = set()
    self.errors: List[str] = []  # why writers stopped (a kill, or a bug)
    self._lock = threading.Condition()
    self._writers = []
    self._closed = False
    self._threads = [
      threading.Thread(target=self._write, args=(address, kill_round, w))
      for w in range(WRITERS)
    ]
    for thread in self._threads:
      thread.start()

  def _write(self, address: str, kill_round: int, writer_id: int) -> None:
    try:
      client = reverb.Client(address)
      with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        with self._lock:
          if self._closed:
            return
          self._writers.append(writer)
        index = 0
        while True:
          batch = []
          for _ in range(ITEMS_PER_FLUSH):
            item = (kill_round, writer_id, index)
            writer.append({'x': np.array(item, np.int64)})
            writer.create_item(
              'queue', _priority(item), writer.history['x'][-1:]
            )
            batch.append(item)
            index += 1
          writer.flush(timeout_ms=60_000)
          with self._lock:
            self.confirmed.update(batch)
            self._lock.notify_all()
    except Exception as e:  # pylint: disable=broad-except
      # The server was killed (what was confirmed is recorded), or a bug,
      # which wait_confirmed reports.
      with self._lock:
        self.errors.append(f'writer {writer_id}: {type(e).__name__}: {e}')
        self._lock.notify_all()

  def wait_confirmed(self, count: int) -> None:
    with self._lock:
      assert self._lock.wait_for(
        lambda: len(self.confirmed) >= count or len(self.errors) == WRITERS,
        120,
      ), f'{len(self.confirmed)} of {count} confirmed; {self.errors}'
      assert len(self.confirmed) >= count, (
        f'every writer stopped at {len(self.confirmed)} of {count} '
        f'confirmed: {self.errors}'
      )

  def join(self) -> None:
    """Closes the writers (a writer would wait for its server to come back)
    and joins the threads."""
    with self._lock:
      self._closed = True
      for writer in self._writers:
        writer.close()
    for thread in self._threads:
      thread.join(120)
      assert not thread.is_alive()


def _drain(address: str) -> List[Tuple[Item, float, int, int]]:
  """Every item of the queue in FIFO order, once: (item, priority, times
  sampled before the drain, key)."""
  client = reverb.Client(address)
  size = client.server_info()['queue'].current_size
  seen: Dict[int, Tuple[Item, float, int, int]] = {}
  order: List[int] = []
  remaining = size
  while remaining:
    for sample in client.sample(
      'queue', remaining, emit_timesteps=False, timeout=60
    ):
      info = sample.info
      key = int(np.asarray(info.key).reshape(-1)[0])
      times = int(np.asarray(info.times_sampled).reshape(-1)[0])
      if key not in seen:
        item = tuple(int(v) for v in np.asarray(sample.data[0]).reshape(-1))
        priority = float(np.asarray(info.priority).reshape(-1)[0])
        seen[key] = (item, priority, times - 1, key)
        order.append(key)
    remaining = client.server_info()['queue'].current_size
  assert len(order) == size
  return [seen[key] for key in order]


@pytest.mark.parametrize('durability', ['sync', 'async'])
def test_sigkill_loses_no_confirmed_insert(tmp_path, durability):
  rng = random.Random(20261206 + (durability == 'async'))
  args = [
    f'--wal_dir={tmp_path / "wal"}',
    f'--wal_durability={durability}',
    '--checkpoint_on_exit=false',
  ]
  checkpoints = str(tmp_path / 'checkpoints')
  confirmed: Set[Item] = set()
  priorities: Dict[Item, float] = {}
  sampled: Dict[Item, int] = {}
  deleted: Set[Item] = set()
  kills = 4
  for kill_round in range(kills):
    shard = ShardProcess(
      checkpoint_dir=checkpoints, config=CONFIG, extra_args=args
    )
    try:
      client = reverb.Client(shard.address)
      writers = _Writers(shard.address, kill_round)
      writers.wait_confirmed(rng.randint(20, 120))
      # While the writers go on: sample the oldest items (FIFO), update one
      # priority and delete one item; the next confirmed flush covers them
      # (the log is written in order).
      for sample in client.sample('queue', 3, emit_timesteps=False):
        item = tuple(int(v) for v in np.asarray(sample.data[0]).reshape(-1))
        sampled[item] = sampled.get(item, 0) + 1
        key = int(np.asarray(sample.info.key).reshape(-1)[0])
      # The last sampled item gets a new priority; one sampled twice (gone
      # from the table now) cannot be updated, so only this one.
      if sampled[item] < 2:
        client.mutate_priorities('queue', updates={key: 0.5 + kill_round})
        priorities[item] = 0.5 + kill_round
      if kill_round == 1:
        client.checkpoint()  # recovery then starts from this checkpoint
      settled = len(writers.confirmed) + WRITERS * ITEMS_PER_FLUSH + 1
      writers.wait_confirmed(settled + rng.randint(0, 60))
    finally:
      shard.kill()  # SIGKILL while the writers write
    writers.join()
    confirmed |= writers.confirmed
    deleted |= {item for item, times in sampled.items() if times >= 2}

  shard = ShardProcess(
    checkpoint_dir=checkpoints, config=CONFIG, extra_args=args
  )
  try:
    assert any('event=replayed' in line for line in shard.lines)
    drained = _drain(shard.address)
  finally:
    shard.kill()
  items = [entry[0] for entry in drained]
  assert len(items) == len(set(items)), 'an item came back twice'
  present = set(items)
  missing = (confirmed - deleted) - present
  assert not missing, (
    f'{len(missing)} confirmed items lost: {sorted(missing)[:5]}'
  )
  assert not present & deleted, 'a deleted item came back'
  for item, priority, times, _ in drained:
    assert priority == priorities.get(item, _priority(item)), item
    assert times == sampled.get(item, 0), item
  # FIFO order per writer: each writer's items ascend.
  last: Dict[Tuple[int, int], int] = {}
  for kill_round, writer, index in items:
    assert index > last.get((kill_round, writer), -1)
    last[(kill_round, writer)] = index


def test_python_server_with_wal_dir_recovers_after_sigkill(tmp_path):
  """Server(wal_dir=) in a Python process SIGKILLed right after its inserts
  were confirmed: a new Server on the same directories has them all."""
  checkpoints, wal = tmp_path / 'checkpoints', tmp_path / 'wal'
  code = f'''
import os, signal
import numpy as np
import tf_reverb as reverb
table = reverb.Table('t', reverb.selectors.Fifo(), reverb.selectors.Fifo(),
                     100, reverb.rate_limiters.MinSize(1))
server = reverb.Server(
    [table],
    checkpointer=reverb.checkpointers.DefaultCheckpointer({str(checkpoints)!r}),
    wal_dir={str(wal)!r}, wal_durability='async')
client = server.localhost_client()
for i in range(30):
  client.insert([np.int64(i)], priorities={{'t': 1.0 + i}})
os.kill(os.getpid(), signal.SIGKILL)
'''
  result = subprocess.run(
    [sys.executable, '-c', code], capture_output=True, text=True, timeout=120
  )
  assert result.returncode == -signal.SIGKILL, result.stderr
  with reverb.Server(
    [_fifo_table()],
    checkpointer=reverb.checkpointers.DefaultCheckpointer(str(checkpoints)),
    wal_dir=str(wal),
  ) as server:
    client = server.localhost_client()
    assert client.server_info()['t'].current_size == 30
    samples = list(client.sample('t', 1, emit_timesteps=False))
    assert int(np.asarray(samples[0].data[0]).reshape(-1)[0]) == 0
    assert float(np.asarray(samples[0].info.priority).reshape(-1)[0]) == 1.0


def _fifo_table():
  return reverb.Table(
    't',
    reverb.selectors.Fifo(),
    reverb.selectors.Fifo(),
    100,
    reverb.rate_limiters.MinSize(1),
  )


def test_wal_arguments_are_checked(tmp_path):
  with pytest.raises(ValueError, match='wal_durability'):
    reverb.Server([_fifo_table()], wal_dir=str(tmp_path), wal_durability='fast')
  with pytest.raises(ValueError, match='wal_fsync_interval'):
    reverb.Server([_fifo_table()], wal_dir=str(tmp_path), wal_fsync_interval=0)
