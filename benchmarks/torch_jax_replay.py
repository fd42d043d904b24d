"""tf_reverb.torch and tf_reverb.jax against the replay buffers PyTorch and
JAX learners use today, side by side in one run (issue 29, item 5).

Batches of 256 transitions (obs, action, reward, discount, next_obs), uniform
sampling without consuming, from the same number of stored transitions in
every system, delivered to the learner (this process) as torch tensors or
jax.Arrays:

  tf_reverb.torch       ReplayDataset, the server in another process (the
                        Bazel-built reverb_server on loopback)
  torchrl tensor        TorchRL ReplayBuffer(LazyTensorStorage), this process
  torchrl memmap        TorchRL ReplayBuffer(LazyMemmapStorage), this process
  torchrl ray           TorchRL RayReplayBuffer (LazyTensorStorage in a Ray
                        actor; the Ray cluster is this process' children)
  tf_reverb.jax         ReplayIterator, the same server as tf_reverb.torch
  flashbax item         flashbax.make_item_buffer on the CPU, this process
  flashbax flat         flashbax.make_flat_buffer on the CPU, this process
                        (stores each observation once, samples pairs)

Two sizes: 'small' (obs float32[8]) and 'large' (obs uint8[84, 84, 4], an
Atari frame stack; random bytes, so incompressible). Every measurement is
bounded by batches: --warmup batches, then K timed ones, K fixed per system
(what its warm-up rate does in --seconds, or --batches). CPU is the
user+system time of every process involved over the timed batches: this
process, plus the server process (tf_reverb) or every Ray process (the ray
row); "per core" is samples per CPU-second. Systems are measured in turns
(all of them, then all again: --rounds), and the table shows medians with the
range over the rounds; ratios are taken within each round.

The goals of issue 29: tf_reverb.torch at least 3x TorchRL's remote buffer
in samples/s, and within 2x (ratio >= 0.5) of the in-process buffers while
running in another process.

  .venv/bin/python benchmarks/torch_jax_replay.py [--rounds 5] [--quick]
      [--sizes small,large] [--systems ...] [--json FILE] [--no_install]
      [--max_in_flight 256] [--num_workers small=4,large=2]
      [--num_batching_threads 2] [--prefetch_batches 2] [--prefetch_to_device 2]

The last five are tf_reverb's sampler options (the defaults are the best
found on the 2-core development machine; none changes the CPU a sample
costs). --num_workers is one count or one per size: a worker asks for its
next samples only once all it asked for arrived, so with one worker the
server idles while they travel and are decoded; more workers keep it busy
(small transitions: 4 did best, large ones 2, whose batches already fill
the cores). tf_reverb.torch is iterated directly (no DataLoader), every
measurement on a fresh iterator.

Missing frameworks (torchrl, tensordict, jax, flashbax) are installed first
from benchmarks/requirements-frameworks.txt, torch and numpy held at their
installed versions (--no_install only prints the command). Absolute figures
on a shared 2-core machine are noise; read the ratios.
"""

import argparse
import functools
import importlib.metadata
import importlib.util
import json
import logging
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REQUIREMENTS = os.path.join(ROOT, 'benchmarks', 'requirements-frameworks.txt')
TORCH_VERSION = '2.13.0'  # the CPU build; never let pip change it
FRAMEWORKS = ('torch', 'tensordict', 'torchrl', 'jax', 'flashbax', 'psutil')

BATCH = 256
SMALL_OBS = 8
FRAME = (84, 84, 4)
KEYS = ('obs', 'action', 'reward', 'discount', 'next_obs')
SYSTEMS = (
  'tf_reverb.torch',
  'torchrl tensor',
  'torchrl memmap',
  'torchrl ray',
  'tf_reverb.jax',
  'flashbax item',
  'flashbax flat',
)
# (numerator, denominator, goal on the samples/s ratio)
RATIOS = (
  ('tf_reverb.torch', 'torchrl ray', 3.0),
  ('tf_reverb.torch', 'torchrl tensor', 0.5),
  ('tf_reverb.torch', 'torchrl memmap', 0.5),
  ('tf_reverb.jax', 'flashbax item', 0.5),
  ('tf_reverb.jax', 'flashbax flat', 0.5),
)


# ---------------------------------------------------------------- set-up


def missing_frameworks() -> List[str]:
  return [m for m in FRAMEWORKS if importlib.util.find_spec(m) is None]


def installed_version(name: str) -> Optional[str]:
  try:
    return importlib.metadata.version(name)
  except importlib.metadata.PackageNotFoundError:
    return None


def install_command(constraints: str) -> List[str]:
  command = [sys.executable, '-m', 'pip', 'install', '-q']
  if installed_version('torch') is None:
    command.append(f'torch=={TORCH_VERSION}')
  return command + ['-r', REQUIREMENTS, '-c', constraints]


def ensure_frameworks(install: bool) -> None:
  """Installs the missing frameworks (idempotent: nothing when all import).

  torch, numpy and ray are constrained to their installed versions (torch
  to TORCH_VERSION when absent), so pip cannot swap torch for a CUDA build.
  """
  missing = missing_frameworks()
  if not missing:
    return
  pins = []
  for name in ('torch', 'numpy', 'ray'):
    version = installed_version(name)
    if name == 'torch':
      version = (version or TORCH_VERSION).split('+')[0]
    if version:
      pins.append(f'{name}=={version}')
  with tempfile.NamedTemporaryFile(
    'w', suffix='-constraints.txt', delete=False
  ) as f:
    f.write('\n'.join(pins) + '\n')
  command = install_command(f.name)
  print(f'missing: {", ".join(missing)}', flush=True)
  if not install:
    print(
      'install them with (constraints: '
      + ', '.join(pins)
      + '):\n  '
      + ' '.join(command)
    )
    sys.exit(2)
  print('installing: ' + ' '.join(command), flush=True)
  subprocess.run(command, check=True)
  os.unlink(f.name)
  importlib.invalidate_caches()
  if missing_frameworks():
    sys.exit(f'still missing after pip: {", ".join(missing_frameworks())}')


def machine() -> Dict[str, Any]:
  import psutil  # pylint: disable=g-import-not-at-top

  model = platform.processor()
  try:
    with open('/proc/cpuinfo') as f:
      for line in f:
        if line.startswith('model name'):
          model = line.split(':', 1)[1].strip()
          break
  except OSError:
    pass
  import tf_reverb  # pylint: disable=g-import-not-at-top

  versions = {
    name: installed_version(name)
    for name in (
      'torch',
      'torchrl',
      'tensordict',
      'jax',
      'jaxlib',
      'flashbax',
      'ray',
      'numpy',
    )
  }
  versions['tf_reverb'] = tf_reverb.__version__
  return {
    'cpu': model,
    'cores': len(os.sched_getaffinity(0)),
    'memory_gb': round(psutil.virtual_memory().total / 2**30, 1),
    'os': platform.platform(),
    'python': platform.python_version(),
    'versions': versions,
    'torch_threads': __import__('torch').get_num_threads(),
  }


# ---------------------------------------------------------------- data


def make_data(size: str, n: int, seed: int = 0) -> Dict[str, Any]:
  """n transitions; next_obs[i] is obs[i + 1] (a view of the same array)."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(seed)
  if size == 'small':
    obs = rng.standard_normal((n + 1, SMALL_OBS), dtype=np.float32)
  else:
    obs = rng.integers(0, 256, (n + 1,) + FRAME, dtype=np.uint8)
  return {
    'obs': obs[:-1],
    'action': rng.integers(0, 4, n).astype(np.int64),
    'reward': rng.standard_normal(n, dtype=np.float32),
    'discount': np.full(n, 0.99, np.float32),
    'next_obs': obs[1:],
  }


def transition_bytes(data: Dict[str, Any]) -> int:
  return sum(v[0].nbytes for v in data.values())


def check_batch(system: str, batch: Dict[str, Any], data: Dict[str, Any]):
  """Every system delivers [BATCH, ...] of each column, of the right kind."""
  for key in KEYS:
    value = batch[key]
    shape = tuple(value.shape)
    want = (BATCH,) + data[key].shape[1:]
    if shape != want:
      raise AssertionError(f'{system}: {key} has shape {shape}, not {want}')
    if system.startswith(('tf_reverb.torch', 'torchrl')):
      import torch  # pylint: disable=g-import-not-at-top

      if not isinstance(value, torch.Tensor):
        raise AssertionError(f'{system}: {key} is a {type(value)}')
    else:
      import jax  # pylint: disable=g-import-not-at-top

      if not isinstance(value, jax.Array):
        raise AssertionError(f'{system}: {key} is a {type(value)}')


# ---------------------------------------------------------------- systems


class System:
  """One replay system: begin() -> a function returning the next batch (a
  mapping of KEYS to tensors, ready to use); end() after a measurement."""

  name = ''
  note = ''
  batches = None  # timed batches per measurement, set by the first one

  def begin(self) -> Callable[[], Any]:
    raise NotImplementedError

  def end(self) -> None:
    pass

  def pids(self) -> List[int]:
    """Processes whose CPU counts, besides this one."""
    return []

  def close(self) -> None:
    pass


SERVER_CONFIG = """
tables {{ table_name: "{table}" sampler {{ uniform: true }}
         remover {{ fifo: true }} max_size: {max_size}
         rate_limiter {{ samples_per_insert: 1 min_size_to_sample: 1
                        min_diff: -1e300 max_diff: 1e300 }} }}
"""


class TfReverbServer:
  """reverb_server in its own process, its table filled with the data."""

  def __init__(self, table: str, data: Dict[str, Any]):
    sys.path.insert(0, os.path.join(ROOT, 'tests'))
    from shard_processes import ShardProcess  # pylint: disable=g-import-not-at-top

    import tf_reverb  # pylint: disable=g-import-not-at-top

    n = len(data['action'])
    self.table = table
    self.process = ShardProcess(
      config=SERVER_CONFIG.format(table=table, max_size=n)
    )
    self.address = self.process.address
    try:
      self._fill(tf_reverb.Client(self.address), data)
    except BaseException:
      self.kill()
      raise

  def _fill(self, client, data):
    table, n = self.table, len(data['action'])
    client.server_info(timeout=60)
    with client.trajectory_writer(num_keep_alive_refs=1) as writer:
      for i in range(n):
        writer.append({k: data[k][i] for k in KEYS})
        writer.create_item(table, 1.0, {k: writer.history[k][-1] for k in KEYS})
        if i % 1000 == 999:
          writer.flush(timeout_ms=600_000)
      writer.flush(timeout_ms=600_000)
    size = client.server_info(timeout=60)[table].current_size
    if size != n:
      raise AssertionError(f'the server holds {size} of {n} transitions')

  def kill(self):
    self.process.kill()


def workers_for(text: str, size: str) -> int:
  """--num_workers: one count for every size ("2") or one per size
  ("small=4,large=2"; a size not named gets -1, the sampler's default)."""
  if '=' not in text:
    return int(text)
  counts = dict(part.split('=') for part in text.split(',') if part)
  return int(counts.get(size, -1))


def sampler_options(
  args: argparse.Namespace, size: Optional[str] = None
) -> Dict[str, Any]:
  """tf_reverb's sampler options for `size` (None: as given, for the
  report)."""
  return dict(
    max_in_flight_samples_per_worker=args.max_in_flight,
    num_workers_per_iterator=args.num_workers
    if size is None
    else workers_for(args.num_workers, size),
    num_batching_threads=args.num_batching_threads,
    prefetch_batches=args.prefetch_batches,
  )


class TfReverbTorch(System):
  """tf_reverb.torch.ReplayDataset, iterated directly (a fresh iterator per
  measurement: connecting is part of the warm-up)."""

  name = 'tf_reverb.torch'

  def __init__(self, server: TfReverbServer, args: argparse.Namespace):
    self.server, self.args = server, args
    self.iterator = None
    try:
      import tf_reverb.torch as reverb_torch  # pylint: disable=g-import-not-at-top

      self.module = reverb_torch
    except ImportError:
      self.module = None
      self.note = 'fallback: NumpyIterator + torch.from_numpy'

  def begin(self):
    structure = {k: 0 for k in KEYS}
    options = sampler_options(self.args, self.server.table)  # named by size
    if self.module is not None:
      dataset = self.module.ReplayDataset(
        self.server.address,
        self.server.table,
        BATCH,
        structure=structure,
        prefetch_to_device=self.args.prefetch_to_device,
        **options,
      )
      self.iterator = iter(dataset)
      iterator = self.iterator
      return lambda: next(iterator).data
    import torch  # pylint: disable=g-import-not-at-top

    import tf_reverb  # pylint: disable=g-import-not-at-top

    self.iterator = tf_reverb.NumpyIterator(
      self.server.address,
      self.server.table,
      BATCH,
      structure=structure,
      **options,
    )
    iterator = self.iterator

    def next_batch():
      data = next(iterator).data
      return {k: torch.from_numpy(v) for k, v in data.items()}

    return next_batch

  def end(self):
    close = getattr(self.iterator, 'close', None)
    if close is not None:
      close()
    self.iterator = None

  def pids(self):
    return [self.server.process.pid]


class TfReverbJax(TfReverbTorch):
  """tf_reverb.jax.ReplayIterator (jax.Array batches on the CPU device)."""

  name = 'tf_reverb.jax'

  def __init__(self, server: TfReverbServer, args: argparse.Namespace):
    self.server, self.args = server, args
    self.iterator = None
    try:
      import tf_reverb.jax as reverb_jax  # pylint: disable=g-import-not-at-top

      self.module = reverb_jax
    except ImportError:
      self.module = None
      self.note = 'fallback: NumpyIterator + jax.device_put'

  def begin(self):
    import jax  # pylint: disable=g-import-not-at-top

    structure = {k: 0 for k in KEYS}
    options = sampler_options(self.args, self.server.table)  # named by size
    if self.module is not None:
      self.iterator = self.module.ReplayIterator(
        self.server.address,
        self.server.table,
        BATCH,
        structure=structure,
        prefetch_to_device=self.args.prefetch_to_device,
        **options,
      )
      iterator = self.iterator
      return lambda: jax.block_until_ready(next(iterator).data)
    import tf_reverb  # pylint: disable=g-import-not-at-top

    self.iterator = tf_reverb.NumpyIterator(
      self.server.address,
      self.server.table,
      BATCH,
      structure=structure,
      **options,
    )
    iterator = self.iterator
    return lambda: jax.block_until_ready(jax.device_put(next(iterator).data))


def tensordict_of(data: Dict[str, Any], start: int = 0, stop: int = -1):
  import torch  # pylint: disable=g-import-not-at-top
  from tensordict import TensorDict  # pylint: disable=g-import-not-at-top

  stop = len(data['action']) if stop < 0 else stop
  return TensorDict(
    {k: torch.from_numpy(data[k][start:stop]) for k in KEYS},
    batch_size=[stop - start],
  )


class TorchRLLocal(System):
  """TorchRL ReplayBuffer in this process (RandomSampler, batch 256)."""

  def __init__(self, storage: str, data: Dict[str, Any]):
    from torchrl.data import LazyMemmapStorage  # pylint: disable=g-import-not-at-top
    from torchrl.data import LazyTensorStorage  # pylint: disable=g-import-not-at-top
    from torchrl.data import RandomSampler  # pylint: disable=g-import-not-at-top
    from torchrl.data import ReplayBuffer  # pylint: disable=g-import-not-at-top

    n = len(data['action'])
    self.scratch = None
    if storage == 'memmap':
      self.name = 'torchrl memmap'
      self.scratch = tempfile.mkdtemp(prefix='torchrl-memmap-')
      backing = LazyMemmapStorage(n, scratch_dir=self.scratch)
    else:
      self.name = 'torchrl tensor'
      backing = LazyTensorStorage(n)
    self.buffer = ReplayBuffer(
      storage=backing, sampler=RandomSampler(), batch_size=BATCH
    )
    for start in range(0, n, 10_000):
      self.buffer.extend(tensordict_of(data, start, min(n, start + 10_000)))
    if len(self.buffer) != n:
      raise AssertionError(f'{self.name} holds {len(self.buffer)} of {n}')

  def begin(self):
    return self.buffer.sample

  def close(self):
    self.buffer = None
    if self.scratch:
      shutil.rmtree(self.scratch, ignore_errors=True)


class TorchRLRay(System):
  """TorchRL RayReplayBuffer: a LazyTensorStorage ReplayBuffer in a Ray
  actor, sampled through Ray from this process."""

  name = 'torchrl ray'

  def __init__(self, data: Dict[str, Any], exclude_pids: Sequence[int]):
    import psutil  # pylint: disable=g-import-not-at-top
    import ray  # pylint: disable=g-import-not-at-top
    from torchrl.data import LazyTensorStorage  # pylint: disable=g-import-not-at-top
    from torchrl.data import RayReplayBuffer  # pylint: disable=g-import-not-at-top

    n = len(data['action'])
    if not ray.is_initialized():
      ray.init(
        num_cpus=len(os.sched_getaffinity(0)),
        include_dashboard=False,
        log_to_driver=False,
        logging_level='error',
      )
    self.buffer = RayReplayBuffer(
      storage=functools.partial(LazyTensorStorage, n),
      batch_size=BATCH,
      remote_config={'num_cpus': 1},
    )
    self.note = f'transport {self.buffer.transport_kind}'
    for start in range(0, n, 1000):
      self.buffer.extend(tensordict_of(data, start, min(n, start + 1000)))
    if len(self.buffer) != n:
      raise AssertionError(f'{self.name} holds {len(self.buffer)} of {n}')
    self.exclude = set(exclude_pids)
    self.psutil = psutil

  def begin(self):
    return self.buffer.sample

  def pids(self):
    # The Ray cluster (GCS, raylet, the actor's worker, ...) is this
    # process' descendants.
    return [
      p.pid
      for p in self.psutil.Process().children(recursive=True)
      if p.pid not in self.exclude
    ]

  def close(self):
    self.buffer.close()
    self.buffer = None


class Flashbax(System):
  """A Flashbax buffer on the CPU device, sampled by a jitted function."""

  def __init__(self, kind: str, data: Dict[str, Any]):
    import flashbax  # pylint: disable=g-import-not-at-top
    import jax  # pylint: disable=g-import-not-at-top
    import numpy as np  # pylint: disable=g-import-not-at-top

    n = len(data['action'])
    self.name = f'flashbax {kind}'
    if kind == 'item':
      buffer = flashbax.make_item_buffer(
        max_length=n, min_length=1, sample_batch_size=BATCH, add_sequences=True
      )
      columns = KEYS
      chunk_of = lambda start, stop: {k: data[k][start:stop] for k in columns}
      total = n
    else:
      # Timesteps: obs[t] once each; a sample is (first, second) = (t, t+1).
      buffer = flashbax.make_flat_buffer(
        max_length=n + 1,
        min_length=2,
        sample_batch_size=BATCH,
        add_sequences=True,
      )
      columns = ('obs', 'action', 'reward', 'discount')
      obs = data['obs'].base if data['obs'].base is not None else data['obs']

      def chunk_of(start, stop):
        chunk = {'obs': obs[start:stop]}
        for k in columns[1:]:
          column = data[k]
          # The last timestep has no transition of its own: pad it.
          pad = max(0, stop - len(column))
          chunk[k] = column[start : stop - pad]
          if pad:
            chunk[k] = np.concatenate([chunk[k], np.zeros(pad, column.dtype)])
        return chunk

      total = n + 1
    self.kind = kind
    state = buffer.init({k: data[k][0] for k in columns})
    add = jax.jit(buffer.add, donate_argnums=0)
    step = 1000
    for start in range(0, total, step):
      state = add(state, chunk_of(start, min(total, start + step)))
    jax.block_until_ready(state)
    self.state = state

    @jax.jit
    def sample(state, key):
      key, sub = jax.random.split(key)
      experience = buffer.sample(state, sub).experience
      if kind == 'flat':
        experience = dict(experience.first, next_obs=experience.second['obs'])
      return key, experience

    self.sample = sample
    self.key = jax.random.PRNGKey(0)

  def begin(self):
    import jax  # pylint: disable=g-import-not-at-top

    def next_batch():
      self.key, batch = self.sample(self.state, self.key)
      return jax.block_until_ready(batch)

    return next_batch

  def close(self):
    self.state = None


# ---------------------------------------------------------------- measuring


def cpu_seconds(pids: Sequence[int]) -> Dict[int, float]:
  import psutil  # pylint: disable=g-import-not-at-top

  times = {}
  for pid in pids:
    try:
      t = psutil.Process(pid).cpu_times()
      times[pid] = t.user + t.system
    except psutil.Error:
      pass
  return times


def measure(system: System, args, data) -> Dict[str, Any]:
  """One measurement: warm-up, then system.batches timed batches.

  The first measurement of a system also sizes it: system.batches is the
  number of batches its warm-up rate does in --seconds (at least
  --min_batches; --batches sets it for every system instead), kept for
  every round.
  """
  next_batch = system.begin()
  try:
    check_batch(system.name, next_batch(), data)
    began, done = time.perf_counter(), 0
    while done < args.warmup or (
      system.batches is None and time.perf_counter() - began < args.seconds / 4
    ):
      next_batch()
      done += 1
    if system.batches is None:
      rate = done / (time.perf_counter() - began)
      system.batches = args.batches or max(
        args.min_batches, math.ceil(rate * args.seconds)
      )
    pids = [os.getpid()] + system.pids()
    before = cpu_seconds(pids)
    start = time.perf_counter()
    for _ in range(system.batches):
      next_batch()
    elapsed = time.perf_counter() - start
    after = cpu_seconds(pids)
  finally:
    system.end()
  cpu = sum(after[p] - before[p] for p in after if p in before)
  samples = system.batches * BATCH
  return {
    'batches': system.batches,
    'seconds': elapsed,
    'batches_per_s': system.batches / elapsed,
    'samples_per_s': samples / elapsed,
    'mb_per_s': samples * transition_bytes(data) / elapsed / 1e6,
    'cpu_ms_per_batch': 1e3 * cpu / system.batches,
    'samples_per_cpu_s': samples / cpu if cpu > 0 else float('nan'),
    'processes': len(after),
  }


def build_systems(
  names: Sequence[str], size: str, data, args, systems: List, servers: List
):
  """Appends the systems to `systems` and the tf_reverb server, if any, to
  `servers` as they come up (so that the caller can close them on errors)."""
  server = None
  if any(name.startswith('tf_reverb') for name in names):
    began = time.perf_counter()
    server = TfReverbServer(size, data)
    servers.append(server)
    print(
      f'  tf_reverb server (pid {server.process.pid}) filled in '
      f'{time.perf_counter() - began:.1f} s',
      flush=True,
    )
  for name in names:
    began = time.perf_counter()
    if name == 'tf_reverb.torch':
      system = TfReverbTorch(server, args)
    elif name == 'tf_reverb.jax':
      system = TfReverbJax(server, args)
    elif name in ('torchrl tensor', 'torchrl memmap'):
      system = TorchRLLocal(name.split()[1], data)
    elif name == 'torchrl ray':
      system = TorchRLRay(data, [server.process.pid] if server else [])
    elif name in ('flashbax item', 'flashbax flat'):
      system = Flashbax(name.split()[1], data)
    else:
      raise ValueError(f'unknown system {name!r}; known: {SYSTEMS}')
    print(
      f'  {name} ready in {time.perf_counter() - began:.1f} s'
      + (f' ({system.note})' if system.note else ''),
      flush=True,
    )
    systems.append(system)


def spread(values: Sequence[float]) -> str:
  return f'{min(values):,.0f}-{max(values):,.0f}'


def summarize(size: str, rounds: List[Dict[str, Dict[str, Any]]], systems):
  med = statistics.median
  names = [s.name for s in systems]
  notes = {s.name: s.note for s in systems}
  print(f'\n{size}: medians of {len(rounds)} round(s) (range over the rounds)')
  print(
    f'  {"system":16} {"batches/s":>10} {"samples/s":>22} {"MB/s":>7} '
    f'{"CPU ms/batch":>13} {"samples/CPU-s":>24} {"procs":>5} {"K":>6}'
  )
  summary = {}
  for name in names:
    runs = [r[name] for r in rounds if name in r]
    if not runs:
      continue
    row = {
      key: med(run[key] for run in runs)
      for key in (
        'batches_per_s',
        'samples_per_s',
        'mb_per_s',
        'cpu_ms_per_batch',
        'samples_per_cpu_s',
      )
    }
    row['samples_per_s_range'] = spread([r['samples_per_s'] for r in runs])
    row['samples_per_cpu_s_range'] = spread(
      [r['samples_per_cpu_s'] for r in runs]
    )
    summary[name] = row
    print(
      f'  {name:16} {row["batches_per_s"]:10,.1f} '
      f'{row["samples_per_s"]:10,.0f} ({row["samples_per_s_range"]:>10}) '
      f'{row["mb_per_s"]:7,.0f} {row["cpu_ms_per_batch"]:13.2f} '
      f'{row["samples_per_cpu_s"]:11,.0f} ({row["samples_per_cpu_s_range"]:>10}) '
      f'{runs[0]["processes"]:5d} {runs[0]["batches"]:6d}'
      + (f'  [{notes[name]}]' if notes[name] else '')
    )
  print(
    '  ratios (median of the per-round ratios, range): samples/s, '
    'samples per CPU-second; goal on samples/s'
  )
  ratios = []
  for top, bottom, goal in RATIOS:
    pairs = [r for r in rounds if top in r and bottom in r]
    if not pairs:
      continue
    speed = [
      r[top]['samples_per_s'] / r[bottom]['samples_per_s'] for r in pairs
    ]
    per_core = [
      r[top]['samples_per_cpu_s'] / r[bottom]['samples_per_cpu_s']
      for r in pairs
    ]
    met = med(speed) >= goal
    ratios.append(
      {
        'top': top,
        'bottom': bottom,
        'goal': goal,
        'samples_per_s': med(speed),
        'samples_per_s_range': [min(speed), max(speed)],
        'samples_per_cpu_s': med(per_core),
        'samples_per_cpu_s_range': [min(per_core), max(per_core)],
        'met': met,
      }
    )
    print(
      f'  {top} / {bottom:15} {med(speed):6.2f}x ({min(speed):.2f}-'
      f'{max(speed):.2f})  per core {med(per_core):6.2f}x '
      f'({min(per_core):.2f}-{max(per_core):.2f})  goal >= {goal:g}x: '
      f'{"met" if met else "NOT met"}'
    )
  return summary, ratios


def run_size(size: str, n: int, args) -> Dict[str, Any]:
  print(f'\n== {size}: {n:,} transitions, batches of {BATCH} ==', flush=True)
  data = make_data(size, n)
  print(
    f'  a transition is {transition_bytes(data):,} B '
    f'({", ".join(f"{k} {data[k].dtype}{list(data[k].shape[1:])}" for k in KEYS)})',
    flush=True,
  )
  rounds, systems, servers = [], [], []
  try:
    build_systems(args.systems, size, data, args, systems, servers)
    for index in range(args.rounds):
      results = {}
      load = os.getloadavg()[0]
      for system in systems:
        results[system.name] = measure(system, args, data)
      rounds.append(results)
      print(
        f'  round {index + 1}/{args.rounds} (load {load:.1f}): '
        + ', '.join(
          f'{name} {r["samples_per_s"]:,.0f}/s' for name, r in results.items()
        ),
        flush=True,
      )
  finally:
    for system in systems:
      system.close()
    for server in servers:
      server.kill()
  summary, ratios = summarize(size, rounds, systems)
  return {
    'size': size,
    'transitions': n,
    'transition_bytes': transition_bytes(data),
    'batches': {s.name: s.batches for s in systems},
    'warmup': args.warmup,
    'rounds': rounds,
    'summary': summary,
    'ratios': ratios,
  }


def main():
  parser = argparse.ArgumentParser(
    description=__doc__.split('\n\n')[0],
    formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  parser.add_argument('--rounds', type=int, default=5)
  parser.add_argument('--quick', action='store_true', help='a short run')
  parser.add_argument('--sizes', default='small,large')
  parser.add_argument('--systems', default=','.join(SYSTEMS))
  parser.add_argument('--small_transitions', type=int, default=100_000)
  parser.add_argument('--large_transitions', type=int, default=10_000)
  parser.add_argument(
    '--seconds',
    type=float,
    default=2.0,
    help='sizes each system\'s measurement: the number of batches its '
    'warm-up rate does in this time, fixed for all rounds',
  )
  parser.add_argument('--min_batches', type=int, default=20)
  parser.add_argument(
    '--batches', type=int, help='timed batches of every system instead'
  )
  parser.add_argument('--warmup', type=int, default=10)
  parser.add_argument('--max_in_flight', type=int, default=256)
  parser.add_argument(
    '--num_workers',
    default='small=4,large=2',
    help='sampler workers: one count, or one per size (small=4,large=2)',
  )
  parser.add_argument('--num_batching_threads', type=int, default=2)
  parser.add_argument('--prefetch_batches', type=int, default=2)
  parser.add_argument('--prefetch_to_device', type=int, default=2)
  parser.add_argument('--json', help='also write every figure to this file')
  parser.add_argument(
    '--no_install',
    action='store_true',
    help='do not pip-install missing frameworks; print the command',
  )
  args = parser.parse_args()
  if args.quick:
    args.rounds = min(args.rounds, 1)
    args.small_transitions = min(args.small_transitions, 2000)
    args.large_transitions = min(args.large_transitions, 300)
    args.seconds = min(args.seconds, 0.2)
    args.min_batches = min(args.min_batches, 3)
    args.warmup = min(args.warmup, 2)
  args.systems = [s.strip() for s in args.systems.split(',') if s.strip()]
  ensure_frameworks(install=not args.no_install)
  os.environ.setdefault('JAX_PLATFORMS', 'cpu')
  os.environ.setdefault('RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO', '0')
  import torchrl  # noqa: F401  # pylint: disable=g-import-not-at-top

  logging.getLogger('torchrl').setLevel(logging.WARNING)

  info = machine()
  print(
    f'machine: {info["cpu"]}, {info["cores"]} cores, '
    f'{info["memory_gb"]} GB; {info["os"]}; Python {info["python"]}; '
    f'torch threads {info["torch_threads"]}'
  )
  print(
    'versions: '
    + ', '.join(f'{k} {v}' for k, v in info['versions'].items() if v)
  )
  print(
    'tf_reverb sampler options: '
    + ', '.join(f'{k}={v}' for k, v in sampler_options(args).items())
    + f', prefetch_to_device={args.prefetch_to_device}'
  )
  sizes = {
    'small': args.small_transitions,
    'large': args.large_transitions,
  }
  report = {'machine': info, 'options': sampler_options(args), 'sizes': []}
  try:
    for size in args.sizes.split(','):
      report['sizes'].append(run_size(size, sizes[size], args))
  finally:
    if 'ray' in sys.modules and sys.modules['ray'].is_initialized():
      sys.modules['ray'].shutdown()
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(report, f, indent=1)


if __name__ == '__main__':
  main()
