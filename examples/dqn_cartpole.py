"""Distributed DQN on CartPole with tf_reverb: the product doing its real job.

  python examples/dqn_cartpole.py [--framework {tensorflow,torch,jax}]
                                  [--quick] [--resume] [--actors N]
                                  [--max_env_steps N] [--episodes N]
                                  [--ray [--shards N]]

The Bazel-built ``reverb_server`` binary holds the replay data: a prioritized
replay table rate-limited by SampleToInsertRatio, and a weights table; it
checkpoints periodically and on exit. N actor processes play gymnasium's
CartPole with a Q-network and insert every transition; one learner process
trains from the replay table, updates priorities and publishes its weights,
which the actors load from the weights table. ``--framework`` picks the
agent (examples/dqn/):

- ``tensorflow`` (the default, ``dqn/agent_tf.py``): Keras Q-networks; the
  actors insert with the graph-mode insert op inside a ``tf.function``; the
  learner trains with Keras from a ``TrajectoryDataset.from_table_signature``
  pipeline, updates priorities with ``TFClient.update_priorities`` and
  publishes its weights with the Keras callback of tf_reverb.
- ``torch`` (``dqn/agent_torch.py``) and ``jax`` (``dqn/agent_jax.py``): no
  process imports TensorFlow. The actors write with the TrajectoryWriter
  (``dqn/writer_actor.py``); the learner reads through
  ``tf_reverb.torch.ReplayDataset`` / ``tf_reverb.jax.ReplayIterator`` and
  updates priorities with their ``update_priorities``; weights travel as one
  flat float32 vector (``dqn/common.py``).

This process orchestrates: it prints a live progress line, and at the end a
summary paragraph, ``summary.json`` and ``learning_curve.png`` in --run_dir.
``--resume`` continues a killed run from the server's latest checkpoint and
the learner's saved weights. Ctrl-C stops everything cleanly.

``--ray`` is the distributed mode: a local Ray (``ray.init``) runs the actors
and the learner as Ray actors, and the replay data lives in a
``tf_reverb.ray.ReplayCluster`` of ``--shards`` servers (default 2; each
checkpoints to ``checkpoints/shard-<i>``). Actor i inserts into shard
i mod N: an actor's inserts ride one reused stream, which gRPC's round_robin
places on whichever shard was ready first, so actors started together could
all land on one shard and leave the others' rate limiters without data. The
learner samples through the sharded address (several sampler workers on
streams re-created every few batches, which round_robin spreads over the
shards) and sends each priority update to every shard (a key unknown to a
shard is ignored there); the weights table of shard 0 carries the weights.
The summary reports items and samples per shard.

A run ends when the mean return of the last 20 episodes reaches
``--target_return``, or after ``--max_env_steps`` environment steps or
``--episodes`` episodes played by this invocation; ``--minutes`` adds an
optional wall-clock budget. The defaults are bounded by steps, so what a run
does does not depend on how fast the machine is.

TensorFlow's start-up notices (oneDNN, CPU features, absl's "before
InitializeLog" line) are turned off for this process and its children unless
the environment already sets ``TF_CPP_MIN_LOG_LEVEL`` or
``TF_ENABLE_ONEDNN_OPTS``; TF's warnings and errors stay visible.
"""

import argparse
import base64
import collections
import importlib.util
import json
import multiprocessing as mp
import os
import queue
import re
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List

# Before anything imports TensorFlow (the spawned actors and learner inherit
# the environment). TF_CPP_MIN_LOG_LEVEL=1 drops TF's INFO lines
# (cpu_feature_guard, ...) but keeps its warnings and errors. TF 2.16+ logs
# "oneDNN custom operations are on" through its bundled absl whatever the log
# level, and that first absl log line is what prints "All log messages before
# absl::InitializeLog() is called are written to STDERR"; only choosing
# oneDNN explicitly avoids it. This example's small Dense networks gain
# nothing from oneDNN's custom ops; a user's own setting of either variable
# wins.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '1')
os.environ.setdefault('TF_ENABLE_ONEDNN_OPTS', '0')

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

# The agents live in the package dqn/ beside this file (importable also when
# this file is run with runpy; spawned workers inherit sys.path).
if os.path.dirname(os.path.abspath(__file__)) not in sys.path:
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from dqn import common  # pylint: disable=g-import-not-at-top,wrong-import-position
from dqn.common import PROCESS_EXIT_TIMEOUT_S  # pylint: disable=g-import-not-at-top,wrong-import-position
from dqn.common import RANDOM_POLICY_RETURN  # pylint: disable=g-import-not-at-top,wrong-import-position
from dqn.common import REPLAY  # pylint: disable=g-import-not-at-top,wrong-import-position
from dqn.common import RPC_TIMEOUT_S  # pylint: disable=g-import-not-at-top,wrong-import-position
from dqn.common import WEIGHTS  # pylint: disable=g-import-not-at-top,wrong-import-position

# How each --framework is named in the output.
FRAMEWORK_NAMES = {'tensorflow': 'Keras', 'torch': 'PyTorch', 'jax': 'JAX'}

# ---------------------------------------------------------------------------
# Orchestrator.


def server_config(config: Dict[str, Any]) -> Dict[str, Any]:
  """The reverb_server configuration (JSON form of ReverbServerConfig)."""
  # pylint: disable=g-import-not-at-top
  import tf_reverb as reverb
  from tf_reverb import reverb_types

  # pylint: enable=g-import-not-at-top
  limiter = reverb.rate_limiters.SampleToInsertRatio(
    samples_per_insert=config['samples_per_insert'],
    min_size_to_sample=config['min_replay_size'],
    error_buffer=config['min_replay_size'] * config['samples_per_insert'],
  )
  signature = reverb_types.encode_signature(
    common.transition_signature(config['framework'])
  )
  return {
    'port': 0,
    'tables': [
      {
        'table_name': REPLAY,
        'sampler': {'prioritized': {'priority_exponent': 0.6}},
        'remover': {'fifo': True},
        'max_size': config['replay_size'],
        'rate_limiter': {
          'samples_per_insert': limiter.samples_per_insert,
          'min_size_to_sample': limiter.min_size_to_sample,
          'min_diff': limiter.min_diff,
          'max_diff': limiter.max_diff,
        },
        'signature': base64.b64encode(signature).decode(),
      },
      {
        'table_name': WEIGHTS,  # keras_callbacks.weights_table's layout
        'sampler': {'lifo': True},
        'remover': {'fifo': True},
        'max_size': 1,
        'rate_limiter': {
          'samples_per_insert': 1.0,
          'min_size_to_sample': 1,
          'min_diff': -1e300,
          'max_diff': 1e300,
        },
      },
    ],
  }


# ---------------------------------------------------------------------------
# --ray: the actors and the learner as Ray actors.


class RayEvent:
  """A stop flag shared with Ray actors (``set``/``is_set``, as mp.Event).

  ``is_set`` asks the flag's Ray actor at most every 0.2 s and caches a set
  flag: actors call it every environment step.
  """

  def __init__(self):
    import ray  # pylint: disable=g-import-not-at-top

    class Flag:
      """Holds the flag."""

      def __init__(self):
        self.value = False

      def set(self):
        self.value = True

      def is_set(self):
        return self.value

    self._flag = ray.remote(num_cpus=0)(Flag).remote()
    self._seen = False
    self._checked = 0.0

  def set(self) -> None:
    import ray  # pylint: disable=g-import-not-at-top

    ray.get(self._flag.set.remote(), timeout=RPC_TIMEOUT_S)
    self._seen = True

  def is_set(self) -> bool:
    import ray  # pylint: disable=g-import-not-at-top

    if not self._seen and time.monotonic() - self._checked > 0.2:
      self._seen = ray.get(self._flag.is_set.remote(), timeout=RPC_TIMEOUT_S)
      self._checked = time.monotonic()
    return self._seen


class RayProcess:
  """`target(*args)` in a Ray actor of its own, with the parts of
  multiprocessing.Process the Run uses (start, is_alive, join, exitcode,
  terminate, kill, name)."""

  def __init__(self, target: Any, name: str, args: tuple):
    import ray  # pylint: disable=g-import-not-at-top

    class Runner:
      """Runs one function."""

      def run(self, function, *arguments):
        function(*arguments)

    self.name = name
    self.exitcode = None
    self._target, self._args = target, args
    self._actor = ray.remote(num_cpus=1, max_restarts=0)(Runner).remote()
    self._result = None

  def start(self) -> None:
    self._result = self._actor.run.remote(self._target, *self._args)

  def _collect(self, timeout: float) -> None:
    import ray  # pylint: disable=g-import-not-at-top

    if self.exitcode is not None or self._result is None:
      return
    ready, _ = ray.wait([self._result], timeout=timeout)
    if not ready:
      return
    try:
      ray.get(self._result)
      self.exitcode = 0
    except ray.exceptions.RayError as e:
      self.exitcode = 1
      print(f'{self.name} failed: {e}', file=sys.stderr)

  def is_alive(self) -> bool:
    self._collect(0)
    return self._result is not None and self.exitcode is None

  def join(self, timeout: float = None) -> None:
    self._collect(timeout)

  def terminate(self) -> None:
    import ray  # pylint: disable=g-import-not-at-top

    ray.kill(self._actor)
    if self.exitcode is None:
      self.exitcode = -signal.SIGTERM

  kill = terminate


class Run:
  """Starts, watches and stops the server, the actors and the learner."""

  def __init__(self, args: argparse.Namespace):
    self.args = args
    self.run_dir = os.path.abspath(args.run_dir)
    os.makedirs(self.run_dir, exist_ok=True)
    self.state_path = os.path.join(self.run_dir, 'state.json')
    previous = {}
    if args.resume and os.path.exists(self.state_path):
      with open(self.state_path) as f:
        previous = json.load(f)
    elif not args.resume:
      for name in os.listdir(self.run_dir):  # a fresh run starts empty
        if name in (
          'checkpoints',
          'state.json',
          *common.LEARNER_WEIGHTS_FILE.values(),
        ):
          subprocess.run(
            ['rm', '-rf', os.path.join(self.run_dir, name)], check=True
          )
    # A run resumes with the framework it trained with (the learner's saved
    # weights are in that framework's format).
    if previous and previous.get('framework', 'tensorflow') != args.framework:
      raise SystemExit(
        f'--resume: the run in {self.run_dir} trained with --framework '
        f'{previous.get("framework", "tensorflow")}, not {args.framework}'
      )
    self.config = dict(
      framework=args.framework,
      num_actors=args.actors,
      seed=args.seed,
      resume=args.resume,
      initial_steps=previous.get('env_steps', 0),
      epsilon_decay_steps=args.epsilon_decay_steps,
      final_epsilon=0.05,
      discount=0.99,
      batch_size=64,
      learning_rate=1e-3,
      target_update_every=200,
      publish_every=50,
      samples_per_insert=8.0,
      min_replay_size=500,
      replay_size=50_000,
      learner_weights=os.path.join(
        self.run_dir, common.LEARNER_WEIGHTS_FILE[args.framework]
      ),
      # Set by start_server in --ray mode: shard 0 carries the weights,
      # priority updates go to every shard, the learner samples every
      # shard with several workers on streams re-created every few batches.
      weights_address=None,
      shard_addresses=None,
      sampler_workers=2 * args.shards if args.ray else -1,
      samples_per_stream=4 * 64 if args.ray else -1,
    )
    self.cluster = None
    self.shard_counts: List[Dict[str, int]] = []
    self.returns: List[float] = list(previous.get('returns', []))
    self.return_steps: List[int] = list(previous.get('return_steps', []))
    self.env_steps = previous.get('env_steps', 0)
    # This invocation's budgets (--max_env_steps, --episodes) count from here.
    self.initial_env_steps = self.env_steps
    self.initial_episodes = len(self.returns)
    self.actor_steps = collections.defaultdict(int)  # new steps, per actor
    self.actors_stopped = set()  # indices of actors that insert no more
    self.learner_finished = False  # trained, saved its weights
    self.weights_loaded = previous.get('weights_loaded', 0)
    self.learner_batches = 0
    self.weights_published = 0
    self.rates: List[Dict[str, float]] = []
    self.failed: List[str] = []
    # Process name -> whether TensorFlow was imported in it (as reported).
    self.tensorflow_imported: Dict[str, bool] = {}
    self.start = time.time()

  # -- processes --------------------------------------------------------------

  def start_server(self) -> None:
    if self.args.ray:
      self.start_cluster()
      return
    from tf_reverb.server_executable import server_main  # pylint: disable=g-import-not-at-top

    config_path = os.path.join(self.run_dir, 'server.json')
    with open(config_path, 'w') as f:
      json.dump(server_config(self.config), f)
    self.checkpoint_dir = os.path.join(self.run_dir, 'checkpoints')
    self.server_log = open(os.path.join(self.run_dir, 'server.log'), 'w')
    self.server = subprocess.Popen(
      [
        server_main.BINARY_PATH,
        f'--config_file={config_path}',
        f'--checkpoint_dir={self.checkpoint_dir}',
        f'--checkpoint_interval_seconds={self.args.checkpoint_interval}',
      ],
      stderr=subprocess.PIPE,
      text=True,
      start_new_session=True,
    )
    for line in self.server.stderr:
      self._log_server_line(line)
      match = re.search(r'event=started port=(\d+)', line)
      if match:
        self.address = f'localhost:{match.group(1)}'
        break
    else:
      raise RuntimeError('reverb_server did not start; see server.log')
    # Keep draining the server's log so it never blocks on a full pipe.
    import threading  # pylint: disable=g-import-not-at-top

    threading.Thread(target=self._copy_server_log, daemon=True).start()
    import tf_reverb as reverb  # pylint: disable=g-import-not-at-top

    self.client = reverb.Client(self.address)

  def start_cluster(self) -> None:
    """--ray: a local Ray and a ReplayCluster of --shards servers."""
    # Ray's tip about accelerator variables (no GPUs here).
    os.environ.setdefault('RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO', '0')
    import logging  # pylint: disable=g-import-not-at-top
    import ray  # pylint: disable=g-import-not-at-top
    import tf_reverb as reverb  # pylint: disable=g-import-not-at-top
    from tf_reverb.ray import ReplayCluster  # pylint: disable=g-import-not-at-top

    # Logical CPUs: one per shard, actor and the learner (oversubscribed on a
    # small machine; they mostly wait on each other).
    ray.init(
      num_cpus=self.args.shards + self.args.actors + 1,
      include_dashboard=False,
      logging_level=logging.WARNING,
      log_to_driver=False,
    )
    self.checkpoint_dir = os.path.join(self.run_dir, 'checkpoints')
    self.cluster = ReplayCluster(
      server_config(self.config)['tables'],
      num_shards=self.args.shards,
      checkpoint_dir=self.checkpoint_dir,
      checkpoint_interval_seconds=self.args.checkpoint_interval,
      resources_per_shard={'num_cpus': 1},
    )
    self.address = self.cluster.address
    self.shard_addresses = self.cluster.shard_addresses
    self.config['weights_address'] = self.shard_addresses[0]
    self.config['shard_addresses'] = self.shard_addresses
    self.shard_clients = [reverb.Client(a) for a in self.shard_addresses]

  def _log_server_line(self, line: str) -> None:
    """server.log gets every line; the terminal the server's errors."""
    self.server_log.write(line)
    self.server_log.flush()
    if re.search(r'event=(error|\w+_failed)\b', line):
      sys.stderr.write(f'reverb_server: {line}')

  def _copy_server_log(self) -> None:
    for line in self.server.stderr:
      self._log_server_line(line)

  def start_workers(self) -> None:
    if self.args.ray:
      import ray.util.queue  # pylint: disable=g-import-not-at-top

      self.stop_actors, self.stop_learner = RayEvent(), RayEvent()
      self.stats = ray.util.queue.Queue()  # its Empty is a queue.Empty
      process = RayProcess
    else:
      context = mp.get_context('spawn')
      self.stop_actors = context.Event()
      self.stop_learner = context.Event()
      self.stats = context.Queue()
      process = context.Process
    # --ray: actor i inserts into shard i mod N (see the module docstring).
    insert_addresses = getattr(self, 'shard_addresses', None) or [self.address]
    # Each process imports its framework's agent module (common.run_worker).
    framework = self.args.framework
    self.actors = [
      process(
        target=common.run_worker,
        name=f'actor-{i}',
        args=(
          f'actor-{i}',
          framework,
          'actor_main',
          i,
          insert_addresses[i % len(insert_addresses)],
          self.config,
          self.stop_actors,
          self.stats,
        ),
      )
      for i in range(self.args.actors)
    ]
    self.learner = process(
      target=common.run_worker,
      name='learner',
      args=(
        'learner',
        framework,
        'learner_main',
        self.address,
        self.config,
        self.stop_learner,
        self.stats,
      ),
    )
    for process in self.actors + [self.learner]:
      process.start()

  def _wait(
    self, processes: List[Any], while_alive: Any = None, done: Any = None
  ) -> None:
    """Waits until `processes` exit (or `while_alive` does, or `done()`).

    Drains the stats meanwhile, which keeps their pipe from filling up: a
    child exits only once what it put on the queue has been written. The
    deadline only catches a hung process.
    """
    deadline = time.time() + PROCESS_EXIT_TIMEOUT_S
    while (
      any(p.is_alive() for p in processes)
      and time.time() < deadline
      and (while_alive is None or while_alive.is_alive())
      and not (done and done())
    ):
      for process in processes:
        process.join(timeout=0.1)
      self.drain_stats()

  def stop(self) -> None:
    """Actors first, then the learner, then the server (final checkpoint).

    The actors stop while the learner still samples, so none is left waiting
    in an insert the rate limiter holds back. The learner then stops at its
    next batch or, when it waits for data that will not come, at its
    dataset's next poll of the stop event. The waits end when the processes
    are done; their deadlines only catch a hung process.
    """
    self.stop_actors.set()
    self._wait(
      self.actors,
      while_alive=self.learner,
      done=lambda: all(
        i in self.actors_stopped or not p.is_alive()
        for i, p in enumerate(self.actors)
      ),
    )
    stopped_by_us = []
    if not self.learner.is_alive():
      # Nothing samples any more, so an actor's insert may wait for the rate
      # limiter forever (TFClient.insert has no timeout and rides out server
      # restarts); the actors' finished episodes are reported already.
      stopped_by_us = [
        p
        for i, p in enumerate(self.actors)
        if p.is_alive() and i not in self.actors_stopped
      ]
      for process in stopped_by_us:
        process.terminate()
    self.stop_learner.set()
    self._wait([self.learner], done=lambda: self.learner_finished)
    self.drain_stats()
    try:
      self.poll_server()  # the final counts
    except Exception as e:  # pylint: disable=broad-except
      print(f'Could not read the final table counts: {e}', file=sys.stderr)
    if self.cluster is not None:
      self.cluster.shutdown(timeout=PROCESS_EXIT_TIMEOUT_S)
    else:
      self.server.send_signal(signal.SIGTERM)
      try:
        self.server.wait(timeout=PROCESS_EXIT_TIMEOUT_S)
      except subprocess.TimeoutExpired:
        print('reverb_server did not stop; killing it', file=sys.stderr)
        self.server.kill()
    self._wait(self.actors + [self.learner])
    for process in self.actors + [self.learner]:
      if process.is_alive():
        print(f'{process.name} did not stop; killing it', file=sys.stderr)
        process.kill()
        process.join()
    self.drain_stats()
    # A process that failed while stopping failed the run too.
    self.failed += [
      p.name
      for p in self.actors + [self.learner]
      if p.exitcode != 0
      and p.name not in self.failed
      and p not in stopped_by_us
    ]
    if self.cluster is not None:
      import ray  # pylint: disable=g-import-not-at-top

      ray.shutdown()

  # -- progress ---------------------------------------------------------------

  def drain_stats(self) -> None:
    while True:
      try:
        message = self.stats.get_nowait()
      except queue.Empty:
        return
      kind = message[0]
      if kind == 'actor_stopped':
        self.actors_stopped.add(message[1])
      elif kind == 'modules':
        self.tensorflow_imported[message[1]] = message[2]
      elif kind == 'episode':
        _, actor, episode_return, steps, _, loaded, _ = message
        self.returns.append(episode_return)
        # An actor counts from its share of a resumed run's steps.
        self.actor_steps[actor] = steps - (
          self.config['initial_steps'] // self.config['num_actors']
        )
        self.env_steps = self.initial_env_steps + sum(self.actor_steps.values())
        self.return_steps.append(self.env_steps)
        self.weights_loaded += int(loaded)
      elif kind == 'learner':
        # Counted as it goes, so a learner stopped the hard way still counts.
        self.learner_batches, self.weights_published = message[1], message[4]
      elif kind == 'learner_done':
        self.learner_batches, self.weights_published = message[1], message[2]
        self.learner_finished = True

  def mean_return(self, last: int = 20) -> float:
    return float(np.mean(self.returns[-last:])) if self.returns else 0.0

  def poll_server(self) -> Dict[str, float]:
    """Reads the replay table's counters (summed over the shards, and per
    shard in --ray mode); returns them with the time."""
    clients = self.shard_clients if self.cluster is not None else [self.client]
    infos = [c.server_info(timeout=RPC_TIMEOUT_S)[REPLAY] for c in clients]
    self.shard_counts = [
      {
        'inserted': info.rate_limiter_info.insert_stats.completed,
        'sampled': info.rate_limiter_info.sample_stats.completed,
        'replay_size': info.current_size,
      }
      for info in infos
    ]
    counts = {
      'time': time.time(),
      'inserted': sum(c['inserted'] for c in self.shard_counts),
      'sampled': sum(c['sampled'] for c in self.shard_counts),
    }
    self.inserted, self.sampled = counts['inserted'], counts['sampled']
    self.replay_size = sum(c['replay_size'] for c in self.shard_counts)
    return counts

  def done(self) -> str:
    """Why the run should end now, or '' to go on."""
    if (
      len(self.returns) >= 20 and self.mean_return() >= self.args.target_return
    ):
      return f'the mean return reached {self.args.target_return:g}'
    if (
      self.args.max_env_steps is not None
      and self.env_steps - self.initial_env_steps >= self.args.max_env_steps
    ):
      return f'{self.args.max_env_steps} environment steps were played'
    if (
      self.args.episodes is not None
      and len(self.returns) - self.initial_episodes >= self.args.episodes
    ):
      return f'{self.args.episodes} episodes were played'
    if (
      self.args.minutes is not None
      and time.time() - self.start >= self.args.minutes * 60
    ):
      return f'the {self.args.minutes:g}-minute budget is spent'
    return ''

  def watch(self) -> None:
    """Prints progress once a second until done() or a process dies."""
    previous = None
    while True:
      time.sleep(1.0)  # the progress line's period, not a synchronisation
      self.drain_stats()
      dead = [p.name for p in self.actors + [self.learner] if not p.is_alive()]
      if dead:
        print(
          f'\n{", ".join(dead)} stopped unexpectedly; shutting down',
          file=sys.stderr,
        )
        self.failed = dead
        break
      counts = self.poll_server()
      if previous is not None:
        dt = counts['time'] - previous['time']
        self.rates.append(
          {
            'time': counts['time'] - self.start,
            'inserts_per_s': (counts['inserted'] - previous['inserted']) / dt,
            'samples_per_s': (counts['sampled'] - previous['sampled']) / dt,
          }
        )
        rate = self.rates[-1]
        print(
          f'\r[{counts["time"] - self.start:5.0f}s] steps '
          f'{self.env_steps:7d} episodes {len(self.returns):5d} '
          f'return(last 20) {self.mean_return():6.1f} | inserts/s '
          f'{rate["inserts_per_s"]:6.0f} samples/s '
          f'{rate["samples_per_s"]:7.0f} | replay {self.replay_size:6d} '
          f'| learner steps {self.learner_batches:6d}',
          end='',
          flush=True,
        )
      previous = counts
      reason = self.done()
      if reason:
        print(f'\nStopping: {reason}')
        break

  # -- results ----------------------------------------------------------------

  def save_state(self) -> None:
    with open(self.state_path, 'w') as f:
      json.dump(
        {
          'framework': self.args.framework,
          'env_steps': self.env_steps,
          'returns': self.returns,
          'return_steps': self.return_steps,
          'weights_loaded': self.weights_loaded,
        },
        f,
      )

  def checkpoints(self) -> List[str]:
    """Complete checkpoints (of every shard in --ray mode), oldest first."""
    directories = [self.checkpoint_dir]
    if self.cluster is not None:
      directories = [
        os.path.join(self.checkpoint_dir, f'shard-{i}')
        for i in range(self.args.shards)
      ]
    found = []
    for directory in directories:
      if os.path.isdir(directory):
        found += [
          os.path.join(directory, d)
          for d in os.listdir(directory)
          if os.path.exists(os.path.join(directory, d, 'DONE'))
        ]
    return sorted(found, key=os.path.basename)

  def plot(self, path: str) -> None:
    import matplotlib  # pylint: disable=g-import-not-at-top

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

    figure, (top, bottom) = plt.subplots(2, 1, figsize=(9, 7))
    returns = np.asarray(self.returns)
    if len(returns):
      window = min(20, len(returns))
      smooth = np.convolve(returns, np.ones(window) / window, mode='valid')
      top.plot(
        self.return_steps, returns, '.', alpha=0.3, label='episode return'
      )
      top.plot(
        self.return_steps[window - 1 :], smooth, label=f'mean of last {window}'
      )
    top.axhline(
      RANDOM_POLICY_RETURN, color='grey', ls='--', label='random policy'
    )
    top.set_xlabel('environment steps')
    top.set_ylabel('return')
    top.set_title(
      f'DQN on CartPole-v1 with tf_reverb '
      f'({FRAMEWORK_NAMES[self.args.framework]})'
    )
    top.legend(loc='upper left')
    if self.rates:
      times = [r['time'] for r in self.rates]
      bottom.plot(
        times, [r['inserts_per_s'] for r in self.rates], label='inserts/s'
      )
      bottom.plot(
        times, [r['samples_per_s'] for r in self.rates], label='samples/s'
      )
    bottom.set_xlabel('seconds')
    bottom.set_ylabel('items per second')
    bottom.legend(loc='upper left')
    figure.tight_layout()
    figure.savefig(path, dpi=100)

  def report(self) -> Dict[str, Any]:
    elapsed = time.time() - self.start
    checkpoints = self.checkpoints()
    # Whether TensorFlow was imported here and in the workers that reported
    # (each does as it ends; a worker stopped the hard way does not).
    self.tensorflow_imported['orchestrator'] = 'tensorflow' in sys.modules
    summary = {
      'framework': self.args.framework,
      'elapsed_seconds': elapsed,
      'env_steps': self.env_steps,
      'episodes': len(self.returns),
      'mean_return_last_20': self.mean_return(),
      'best_mean_return_20': max(
        (
          float(np.mean(self.returns[i - 20 : i]))
          for i in range(20, len(self.returns) + 1)
        ),
        default=0.0,
      ),
      'random_policy_return': RANDOM_POLICY_RETURN,
      'items_inserted': getattr(self, 'inserted', 0),
      'samples_consumed': getattr(self, 'sampled', 0),
      'learner_steps': self.learner_batches,
      'priority_updates': self.learner_batches * self.config['batch_size'],
      'weights_published': self.weights_published,
      'weights_loaded': self.weights_loaded,
      'replay_size': getattr(self, 'replay_size', 0),
      'checkpoints': checkpoints,
      'failed_processes': self.failed,
      'tensorflow_imported': any(self.tensorflow_imported.values()),
      'tensorflow_checked_in': sorted(self.tensorflow_imported),
      'shards': [
        dict(counts, address=address)
        for counts, address in zip(
          self.shard_counts, getattr(self, 'shard_addresses', [])
        )
      ]
      if self.cluster is not None
      else [],
      'plot': os.path.join(self.run_dir, 'learning_curve.png'),
    }
    with open(os.path.join(self.run_dir, 'summary.json'), 'w') as f:
      json.dump(summary, f, indent=2)
    self.plot(summary['plot'])
    print(
      f'\nIn {elapsed / 60:.1f} minutes, {self.args.actors} actors played '
      f'{summary["episodes"]} episodes ({self.env_steps} steps) and inserted '
      f'{summary["items_inserted"]} transitions into the reverb_server; the '
      f'learner consumed {summary["samples_consumed"]} samples in '
      f'{self.learner_batches} {FRAMEWORK_NAMES[self.args.framework]} '
      f'training steps, updated '
      f'{summary["priority_updates"]} priorities and published its weights '
      f'{self.weights_published} times (actors loaded them '
      f'{self.weights_loaded} times). The mean return over the last 20 '
      f'episodes is {summary["mean_return_last_20"]:.1f} (random policy: '
      f'~{RANDOM_POLICY_RETURN:.0f}; best 20-episode mean '
      f'{summary["best_mean_return_20"]:.1f}). The replay table holds '
      f'{summary["replay_size"]} items; the latest checkpoint is '
      f'{checkpoints[-1] if checkpoints else "missing"}. Learning curve: '
      f'{summary["plot"]}'
    )
    for i, shard in enumerate(summary['shards']):
      print(
        f'Shard {i} ({shard["address"]}): {shard["inserted"]} items '
        f'inserted, {shard["sampled"]} samples, {shard["replay_size"]} '
        'items held'
      )
    return summary


def parse_args() -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument(
    '--framework',
    choices=sorted(common.AGENTS),
    default='tensorflow',
    help='the agent: Keras with the TensorFlow ops and datasets (default), '
    'or PyTorch or JAX learners reading through tf_reverb.torch / '
    'tf_reverb.jax and actors writing with the TrajectoryWriter (no '
    'TensorFlow imported)',
  )
  parser.add_argument('--actors', type=int, default=2)
  parser.add_argument(
    '--quick',
    action='store_true',
    help='a short run: at most 20000 steps, stops at a '
    'mean return of 100 (under 3 minutes here)',
  )
  parser.add_argument(
    '--resume',
    action='store_true',
    help="continue from the run's last checkpoint",
  )
  parser.add_argument(
    '--max_env_steps',
    type=int,
    default=None,
    help='stop after this many environment steps in this '
    'invocation (default 200000, or 20000 with --quick)',
  )
  parser.add_argument(
    '--episodes',
    type=int,
    default=None,
    help='stop after this many episodes in this invocation (default: no limit)',
  )
  parser.add_argument(
    '--minutes',
    type=float,
    default=None,
    help='also stop after this many minutes (default: no time limit)',
  )
  parser.add_argument(
    '--target_return',
    type=float,
    default=None,
    help='stop once the mean of the last 20 returns reaches '
    'this (default 195, or 100 with --quick)',
  )
  parser.add_argument('--epsilon_decay_steps', type=int, default=None)
  parser.add_argument('--checkpoint_interval', type=int, default=30)
  parser.add_argument('--run_dir', default='runs/dqn_cartpole')
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument(
    '--ray',
    action='store_true',
    help='actors and learner as Ray actors, the replay '
    'data in a tf_reverb.ray.ReplayCluster',
  )
  parser.add_argument(
    '--shards',
    type=int,
    default=None,
    help='servers of the ReplayCluster (--ray only; default 2)',
  )
  args = parser.parse_args()
  # The workers import the framework (its package has the flag's name): say
  # that it is missing before starting anything.
  if importlib.util.find_spec(args.framework) is None:
    parser.error(
      f'--framework {args.framework}: {args.framework} is not installed '
      f'(pip install {args.framework})'
    )
  if args.shards is not None and not args.ray:
    parser.error('--shards needs --ray')
  if args.shards is None:
    args.shards = 2
  if args.shards < 1:
    parser.error(f'--shards ({args.shards}) must be >= 1')
  if args.max_env_steps is None:
    args.max_env_steps = 20_000 if args.quick else 200_000
  if args.target_return is None:
    args.target_return = 100.0 if args.quick else 195.0
  if args.epsilon_decay_steps is None:
    args.epsilon_decay_steps = 5_000 if args.quick else 10_000
  return args


def main() -> None:
  args = parse_args()
  run = Run(args)
  print(f'Run directory: {run.run_dir}')
  agent = f'{FRAMEWORK_NAMES[args.framework]} agent'
  run.start_server()
  if args.ray:
    print(
      f'ReplayCluster of {args.shards} shards at {run.address}; '
      f'starting {args.actors} actors and the learner as Ray actors '
      f'({agent})'
    )
  else:
    print(
      f'reverb_server listening at {run.address}; starting {args.actors} '
      f'actors and the learner ({agent})'
    )
  run.start_workers()
  try:
    run.watch()
  except KeyboardInterrupt:
    print('\nInterrupted: stopping actors, learner and server')
  finally:
    run.stop()
    run.save_state()
  summary = run.report()
  sys.exit(1 if summary['failed_processes'] else 0)


if __name__ == '__main__':
  main()
