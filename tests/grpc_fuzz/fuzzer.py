"""The fuzzer: cases, outcomes and the report.

``Fuzzer`` generates ``Case``s for every RPC from a seeded RNG (valid calls,
field-level and byte-level mutations, cancellations), runs each with a
deadline over a ``RawClient``, classifies the outcome and collects
``Failure``s in a ``Report``; then it sweeps every table (all items must
sample and decode), checks the server still serves good traffic and that its
checkpoint restores. ``main`` prints or sends one case (``python
tests/grpc_fuzz show|send SEED INDEX [HOST:PORT]``).
"""

import dataclasses
import json
import math
import os
import random
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import grpc
import numpy as np
from google.protobuf import message as pb_message

from tf_reverb.proto import reverb_service_pb2 as rs
from tf_reverb.proto import schema_pb2 as sc

from .builders import (
  ALL_TABLES,
  ChunkMeta,
  InsertBuilder,
  PROBE_TABLE,
  TABLE_NAMES,
  good_insert,
)
from .compression import CODECS_METADATA
from .fuzz_server import FuzzServer, Outcome, REQUEST_TYPES, RawClient
from .mutators import INSERT_MUTATORS, byte_mutation
from .oracle import DecodeError, SampledItem, assemble_samples, decode_item

RATE_LIMITER_MESSAGE = 'Rate Limiter: Timeout exceeded'


# --------------------------------------------------------------------------
# Cases


def wire_valid(data: bytes) -> bool:
  """Whether the top level of `data` is well-formed protobuf wire format:
  field numbers >= 1, known wire types, varints of at most 10 bytes,
  lengths inside the data, groups closed (Python's parser accepts a tag of
  field number 0 where C++'s does not)."""
  pos, groups = 0, []

  def read_varint() -> Optional[int]:
    nonlocal pos
    value = 0
    for shift in range(0, 70, 7):
      if pos >= len(data) or shift == 70:
        return None
      byte = data[pos]
      pos += 1
      value |= (byte & 0x7F) << shift
      if not byte & 0x80:
        return value
    return None

  while pos < len(data):
    tag = read_varint()
    if tag is None or tag >> 3 == 0:
      return False
    wire = tag & 7
    if wire == 0:
      if read_varint() is None:
        return False
    elif wire == 1:
      pos += 8
    elif wire == 2:
      length = read_varint()
      if length is None:
        return False
      pos += length
    elif wire == 3:
      groups.append(tag >> 3)
    elif wire == 4:
      if not groups or groups.pop() != tag >> 3:
        return False
    elif wire == 5:
      pos += 4
    else:
      return False
    if pos > len(data):
      return False
  return not groups


def parsable(method: str, data: bytes) -> bool:
  """Whether `data` parses as the request message of `method`."""
  if not wire_valid(data):
    return False
  try:
    REQUEST_TYPES[method].FromString(data)
    return True
  except pb_message.DecodeError:
    return False


@dataclasses.dataclass
class Case:
  """One fuzz request: an RPC with its messages and how to send them."""

  index: int
  method: str
  kind: str  # the mutation family, e.g. 'tensor.zstd_declares_2^40_bytes'
  detail: str  # what exactly was done, for a reproducer
  messages: List[bytes]
  deadline: float = 10.0
  may_block: bool = False  # ending at our deadline is legitimate
  cancel: Optional[str] = None
  half_close: bool = True
  metadata: Tuple[Tuple[str, str], ...] = ()
  good: bool = False  # unmutated and valid: must succeed
  chunks: Dict[int, ChunkMeta] = dataclasses.field(default_factory=dict)

  @property
  def unparsable(self) -> bool:
    """Whether some message does not parse as the method's request."""
    return any(not parsable(self.method, m) for m in self.messages)

  def describe(self) -> str:
    """Method, kind and detail, and the messages' sizes and first bytes."""
    sizes = ', '.join(str(len(m)) for m in self.messages[:8])
    more = '...' if len(self.messages) > 8 else ''
    head = ''
    for m in self.messages:
      if not parsable(self.method, m) or self.kind.startswith('bytes.'):
        head = f'; mutated message bytes[:96]={m[:96].hex()}'
        break
    extra = f' cancel={self.cancel}' if self.cancel else ''
    return (
      f'#{self.index} {self.method} [{self.kind}] {self.detail} '
      f'(messages of {sizes}{more} bytes{extra}){head}'
    )


# --------------------------------------------------------------------------
# Failures and the report


# Checks, as they appear in the report.
CRASH = 'server crashed'
UNRESPONSIVE = 'server unresponsive afterwards'
HANG = 'no answer within the deadline'
BAD_STATUS = 'status UNKNOWN/INTERNAL'
EMPTY_MESSAGE = 'error with an empty message'
UNPARSABLE = 'unparsable request not INVALID_ARGUMENT'
VALID_FAILED = 'valid request failed'
BREAKS_SAMPLING = 'accepted item, then sampling it failed'
UNDECODABLE = 'accepted item that does not decode'
PROTOCOL = 'malformed response stream'
WRONG_CONFIRMATION = 'confirmed a key that was not sent'
SWEEP = 'final sweep'
AFTERWARDS = 'good traffic after the fuzz'
RESTORE = 'checkpoint restore'


@dataclasses.dataclass
class Failure:
  """One failed check."""

  check: str
  method: str
  kind: str
  code: str
  message: str
  reproducer: str

  @property
  def cls(self) -> Tuple[str, str, str, str]:
    """The failure class: method, mutation kind, check, status."""
    return (self.method, self.kind, self.check, self.code)


class Report:
  """Failures grouped by class, and counts of what was run."""

  def __init__(self):
    self.failures: List[Failure] = []
    self.cases_by_method: Dict[str, int] = {}
    self.codes: Dict[Tuple[str, str], int] = {}
    self.notes: List[str] = []
    self.elapsed = 0.0

  def add(self, failure: Failure) -> None:
    """Records a failure (once per class and request)."""
    if any(
      f.cls == failure.cls and f.reproducer == failure.reproducer
      for f in self.failures[-20:]
    ):
      return
    self.failures.append(failure)

  def classes(self) -> Dict[Tuple[str, str, str, str], List[Failure]]:
    """Failures by class, in order of first occurrence."""
    out: Dict[Tuple[str, str, str, str], List[Failure]] = {}
    for f in self.failures:
      out.setdefault(f.cls, []).append(f)
    return out

  def summary(self) -> List[str]:
    """The classes folded by check and status: which methods and kinds."""
    folded: Dict[Tuple[str, str], Dict[str, int]] = {}
    for f in self.failures:
      kinds = folded.setdefault((f.check, f.code), {})
      name = f'{f.method}/{f.kind}'
      kinds[name] = kinds.get(name, 0) + 1
    lines = []
    for (check, code), kinds in folded.items():
      lines.append(
        f'* {check} [{code}]: {sum(kinds.values())} in '
        + ', '.join(f'{k} ({n})' for k, n in sorted(kinds.items()))
      )
    return lines

  def table(self, examples: int = 2) -> str:
    """A readable table of the failure classes with a few examples each."""
    lines = [
      f'grpc fuzz: {sum(self.cases_by_method.values())} requests '
      f'({", ".join(f"{m} {n}" for m, n in sorted(self.cases_by_method.items()))}) '
      f'in {self.elapsed:.1f}s'
    ]
    lines.append(
      'status codes seen: '
      + ', '.join(f'{m}:{c}={n}' for (m, c), n in sorted(self.codes.items()))
    )
    lines.extend(self.notes)
    classes = self.classes()
    if not classes:
      lines.append('no failures')
      return '\n'.join(lines)
    lines.append(
      f'{len(classes)} failure classes, {len(self.failures)} failures.'
    )
    lines.append('by check and status:')
    lines.extend(self.summary())
    lines.append('')
    header = (
      f'{"count":>5}  {"method":<20} {"mutation kind":<40} {"status":<19} check'
    )
    lines.append(header)
    lines.append('-' * len(header))
    for (method, kind, check, code), fs in sorted(classes.items()):
      lines.append(f'{len(fs):>5}  {method:<20} {kind:<40} {code:<19} {check}')
    lines.append('')
    lines.append('examples:')
    for (method, kind, check, code), fs in sorted(classes.items()):
      lines.append(f'* {method} | {kind} | {check} | {code}')
      for f in fs[:examples]:
        lines.append(f'    message: {f.message[:300]!r}')
        lines.append(f'    request: {f.reproducer[:700]}')
    return '\n'.join(lines)

  def to_json(self) -> str:
    """The failures as JSON (class -> count and examples)."""
    return json.dumps(
      [
        {
          'method': k[0],
          'kind': k[1],
          'check': k[2],
          'code': k[3],
          'count': len(v),
          'examples': [dataclasses.asdict(f) for f in v[:3]],
        }
        for k, v in self.classes().items()
      ],
      indent=1,
    )


# --------------------------------------------------------------------------
# The fuzzer


def sample_request(
  table: str, num_samples: int, timeout_ms: Optional[int]
) -> bytes:
  """A serialized SampleStreamRequest (timeout None: field absent)."""
  request = rs.SampleStreamRequest(table=table, num_samples=num_samples)
  if timeout_ms is not None:
    request.rate_limiter_timeout.milliseconds = timeout_ms
  return request.SerializeToString()


class Fuzzer:
  """Runs the fuzz against a fresh server and fills a Report.

  Per case: send, check the outcome (no crash, no hang, no UNKNOWN/INTERNAL,
  messages on every error, unparsable -> INVALID_ARGUMENT, valid requests
  succeed), verify sampled items with the oracle, and probe every accepted
  mutated item: its copy in the LIFO table 'probe' is sampled at once (with
  and without zstd announced, alternately) and must sample and decode; items
  that fail are deleted again so they do not hide later failures.
  """

  def __init__(
    self,
    workdir: str,
    seed: int,
    requests: int,
    log: Callable[[str], None] = print,
  ):
    """`requests` fuzz cases from `seed`, server files under `workdir`."""
    self.workdir = workdir
    self.seed = seed
    self.requests = requests
    self.log = log
    self.report = Report()
    self.server: Optional[FuzzServer] = None
    self.client: Optional[RawClient] = None
    self.incarnation = 0
    # key -> (table, case) of items confirmed by the current server.
    self.origins: Dict[int, List[Tuple[str, Case]]] = {}
    self.keys_by_table: Dict[str, List[int]] = {t: [] for t in ALL_TABLES}
    self.expected_chunks: Dict[int, ChunkMeta] = {}
    self.case: Optional[Case] = None

  # ---- server lifecycle

  def start_server(self) -> None:
    """Starts a server (a fresh checkpoint directory per incarnation)."""
    self.incarnation += 1
    ckpt = os.path.join(self.workdir, f'checkpoints-{self.incarnation}')
    self.server = FuzzServer(
      self.workdir, ckpt, name=f'server-{self.incarnation}'
    )
    self.client = RawClient(self.server.address)
    self.origins.clear()
    self.expected_chunks.clear()
    for keys in self.keys_by_table.values():
      keys.clear()

  def stop_server(self) -> None:
    """Stops the current server (by pid)."""
    if self.client is not None:
      self.client.close()
    if self.server is not None:
      self.server.stop()

  def restart(self, why: str) -> None:
    """Replaces a dead or stuck server and refills it."""
    self.report.notes.append(
      f'server restarted after case #{self.case.index if self.case else -1}'
      f': {why}'
    )
    self.stop_server()
    self.start_server()
    self.baseline(quick=True)

  def known_keys(self, table: str) -> List[int]:
    """Keys of items confirmed into `table` (some may be gone)."""
    return self.keys_by_table.get(table, [])

  # ---- bookkeeping

  def fail(
    self,
    check: str,
    code: Any,
    message: str,
    case: Optional[Case] = None,
    method: Optional[str] = None,
    kind: Optional[str] = None,
    reproducer: Optional[str] = None,
  ) -> None:
    """Records a failure of `case` (or of a named phase); with
    TF_REVERB_FUZZ_DUMP=dir, also writes the case's messages there
    (case-<index>-<n>.bin)."""
    case = case or self.case
    dump = os.environ.get('TF_REVERB_FUZZ_DUMP')
    if dump and case is not None and case.index >= 0:
      os.makedirs(dump, exist_ok=True)
      for n, m in enumerate(case.messages):
        with open(os.path.join(dump, f'case-{case.index}-{n}.bin'), 'wb') as f:
          f.write(m)
    code_name = code.name if isinstance(code, grpc.StatusCode) else str(code)
    self.report.add(
      Failure(
        check,
        method or (case.method if case else '-'),
        kind or (case.kind if case else '-'),
        code_name,
        message,
        reproducer or (case.describe() if case else ''),
      )
    )

  def origin_of(self, key: int, table: str) -> Optional[Case]:
    """The case that inserted item `key` into `table`, if known."""
    for t, case in self.origins.get(key, []):
      if t == table:
        return case
    return None

  def confirm(
    self, case: Case, keys: Sequence[int], tables: Dict[int, List[str]]
  ) -> None:
    """Registers keys an InsertStream confirmed."""
    for key in keys:
      if key not in tables:
        self.fail(WRONG_CONFIRMATION, 'OK', f'key {key} confirmed', case)
        continue
      for table in tables[key]:
        self.origins.setdefault(key, []).append((table, case))
        if table in self.keys_by_table:
          self.keys_by_table[table].append(key)

  # ---- running one case

  def run_case(self, case: Case) -> Outcome:
    """Sends `case`, checks its outcome and follows up (probe, sample checks)."""
    self.case = case
    if case.index >= 0:
      self.report.cases_by_method[case.method] = (
        self.report.cases_by_method.get(case.method, 0) + 1
      )
    out = self.client.call(
      case.method,
      case.messages,
      case.deadline,
      case.metadata,
      case.cancel,
      case.half_close,
    )
    code_key = (case.method, out.code.name)
    self.report.codes[code_key] = self.report.codes.get(code_key, 0) + 1
    self.check_outcome(case, out)
    if not self.server.alive():
      self.fail(
        CRASH,
        out.code,
        f'exit code {self.server.process.returncode}; last log '
        f'lines: {self.server.log(tail=8)}',
        case,
      )
      self.restart('crash')
      return out
    if case.method == 'InsertStream':
      self.after_insert(case, out)
    elif case.method == 'SampleStream':
      self.verify_samples(case, out)
    if (
      out.client_deadline
      or out.code == grpc.StatusCode.UNAVAILABLE
      or case.index % 100 == 0
    ):
      self.health_check()
    return out

  def check_outcome(self, case: Case, out: Outcome) -> None:
    """The per-call assertions (one failure naming every check that failed)."""
    code = out.code
    checks = []
    if (
      case.unparsable
      and not out.cancelled_by_us
      and code != grpc.StatusCode.INVALID_ARGUMENT
    ):
      checks.append(UNPARSABLE)
    if code in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL):
      checks.append(BAD_STATUS)
    if code != grpc.StatusCode.OK and not out.details.strip():
      checks.append(EMPTY_MESSAGE)
    if out.client_deadline and not case.may_block:
      checks.append(HANG)
    if case.good and not out.cancelled_by_us and not out.client_deadline:
      allowed = {grpc.StatusCode.OK}
      if case.method == 'SampleStream' and RATE_LIMITER_MESSAGE in out.details:
        allowed.add(grpc.StatusCode.DEADLINE_EXCEEDED)  # an empty table
      if code not in allowed:
        checks.append(VALID_FAILED)
    if checks:
      message = (
        out.details
        if not out.client_deadline
        else (f'{out.details} after {out.elapsed:.1f}s')
      )
      self.fail(' + '.join(checks), code, message, case)

  def health_check(self) -> None:
    """ServerInfo must answer; restarts the server otherwise."""
    out = self.client.call('ServerInfo', [b''], 20.0)
    if out.code != grpc.StatusCode.OK:
      if self.server.alive():
        self.fail(UNRESPONSIVE, out.code, out.details)
        self.restart('unresponsive')
      else:
        self.fail(
          CRASH,
          out.code,
          f'found dead; last log lines: {self.server.log(tail=8)}',
        )
        self.restart('crash')

  @staticmethod
  def sent_items(case: Case) -> Dict[int, List[str]]:
    """key -> tables of every item in the parsable messages of an InsertStream."""
    out: Dict[int, List[str]] = {}
    for m in case.messages:
      try:
        request = rs.InsertStreamRequest.FromString(m)
      except pb_message.DecodeError:
        continue
      for item in request.items:
        out.setdefault(item.key, []).append(item.table)
    return out

  def after_insert(self, case: Case, out: Outcome) -> None:
    """Registers confirmations and probes the accepted items of a mutated call."""
    sent = self.sent_items(case)
    keys: List[int] = []
    for raw in out.responses:
      try:
        keys.extend(rs.InsertStreamResponse.FromString(raw).keys)
      except pb_message.DecodeError as e:
        self.fail(
          PROTOCOL, out.code, f'unparsable InsertStreamResponse: {e}', case
        )
    self.confirm(case, keys, sent)
    if case.good:
      self.expected_chunks.update(case.chunks)
      missing = [k for k in sent if k not in keys]
      if missing and out.code == grpc.StatusCode.OK and not out.cancelled_by_us:
        self.fail(
          VALID_FAILED,
          out.code,
          f'{len(missing)} of {len(sent)} items not confirmed',
          case,
        )
      return
    probes = {k for k in keys if PROBE_TABLE in sent.get(k, [])}
    if probes and not self.probe(case, probes):
      sent_probes = {k for k, tables in sent.items() if PROBE_TABLE in tables}
      for key in (
        set(keys) | sent_probes
      ):  # quarantine: delete the items everywhere
        for table in sent.get(key, []):
          if table in ALL_TABLES:
            self.delete(table, [key])

  def delete(self, table: str, keys: Sequence[int]) -> None:
    """Deletes items (MutatePriorities); failures are reported."""
    request = rs.MutatePrioritiesRequest(
      table=table, delete_keys=keys
    ).SerializeToString()
    out = self.client.call('MutatePriorities', [request], 20.0)
    if out.code != grpc.StatusCode.OK:
      self.fail(
        VALID_FAILED,
        out.code,
        out.details,
        method='MutatePriorities',
        kind='harness.delete',
        reproducer=f'delete {len(keys)} keys of {table}',
      )

  def probe(self, case: Case, keys: Set[int]) -> bool:
    """Samples (newest first) and deletes the probe items until every one of
    `keys` was seen; False if one failed to sample or decode. Probe items
    the server inserted without confirming them (the stream failed first)
    are sampled on the way."""
    pending = set(keys)
    for _ in range(len(keys) + 8):
      if not pending:
        return True
      # The newest item twice: as clients without zstd get it (the server
      # transcodes zstd chunks to Snappy), then as zstd clients do.
      for metadata in ((), CODECS_METADATA):
        how = 'announcing zstd' if metadata else 'without zstd'
        out = self.client.call(
          'SampleStream', [sample_request(PROBE_TABLE, 1, 5000)], 20.0, metadata
        )
        items, error = assemble_samples(out.responses)
        if out.code != grpc.StatusCode.OK:
          self.fail(
            BREAKS_SAMPLING,
            out.code,
            f'SampleStream ({how}): {out.details}',
            case,
          )
          return False
        if error or not items:
          self.fail(
            PROTOCOL, out.code, error or f'no sample returned ({how})', case
          )
          return False
        for item in items:
          try:
            decode_item(item.info.item, item.chunks)
          except DecodeError as e:
            self.fail(UNDECODABLE, 'OK', f'sampled {how}: {e}', case)
            return False
      for item in items:
        pending.discard(item.info.item.key)
        self.delete(PROBE_TABLE, [item.info.item.key])
    self.report.notes.append(
      f'probe of case #{case.index}: {len(pending)} of its probe items '
      'were not sampled'
    )
    return True

  def verify_samples(
    self, case: Case, out: Outcome, label: Optional[str] = None
  ) -> List[SampledItem]:
    """Checks the items of a SampleStream outcome decode (with content checks)."""
    items, error = assemble_samples(out.responses)
    if error and out.code == grpc.StatusCode.OK:
      self.fail(PROTOCOL, out.code, error, case)
    for item in items:
      key, table = item.info.item.key, item.info.item.table
      try:
        decode_item(item.info.item, item.chunks, self.expected_chunks)
      except DecodeError as e:
        origin = self.origin_of(key, table)
        where = (
          f'{label or "sampled"} by #{case.index} {case.method} [{case.kind}]'
        )
        if origin is not None:  # blame the insert, and delete the item
          self.fail(UNDECODABLE, 'OK', f'{where}: {e}', origin)
          self.delete(table, [key])
        else:
          self.fail(
            UNDECODABLE,
            out.code,
            f'{where}: item {key} of {table} (origin unknown): {e}',
            case,
          )
    return items

  # ---- case generation

  METHOD_WEIGHTS = (
    ('InsertStream', 46),
    ('SampleStream', 20),
    ('MutatePriorities', 10),
    ('InitializeConnection', 7),
    ('ServerInfo', 6),
    ('Reset', 5),
    ('Checkpoint', 3),
  )

  def make_case(self, index: int) -> Case:
    """Case `index` (its own RNG: seed and index)."""
    rng = random.Random(f'{self.seed}/{index}')
    methods, weights = zip(*self.METHOD_WEIGHTS)
    method = rng.choices(methods, weights)[0]
    return getattr(self, f'case_{method}')(rng, index)

  @staticmethod
  def add_probe(rng: random.Random, b: InsertBuilder) -> None:
    """Adds a copy into the probe table of each item (the first three and
    the last), right after it in its message."""
    items = b.items()
    chosen = items[:3] + items[3:][-1:]
    for m, item in reversed(chosen):
      copy = sc.PrioritizedItem()
      copy.CopyFrom(item)
      copy.key = rng.getrandbits(64)
      copy.table = PROBE_TABLE
      copy.priority = 1.0
      position = list(b.messages[m].items).index(item) + 1
      b.messages[m].items.insert(position, copy)

  def case_InsertStream(self, rng: random.Random, index: int) -> Case:  # pylint: disable=invalid-name
    """A valid call, a field- or byte-mutated one, or a cancelled one."""
    table = rng.choice(TABLE_NAMES)
    b = good_insert(rng, table)
    r = rng.random()
    if r < 0.10:
      return Case(
        index,
        'InsertStream',
        'good',
        f'{len(b.items())} valid items into {table}',
        b.serialized(),
        good=True,
        chunks=b.chunks,
      )
    if r < 0.72:
      names = list(INSERT_MUTATORS)
      name = rng.choices(names, [INSERT_MUTATORS[n][0] for n in names])[0]
      detail = INSERT_MUTATORS[name][1](rng, b, self)
      self.add_probe(rng, b)
      return Case(
        index,
        'InsertStream',
        name,
        f'{detail} (items into {table})',
        b.serialized(),
      )
    if r < 0.92:
      self.add_probe(rng, b)
      messages = b.serialized()
      i = rng.randrange(len(messages))
      kind, detail, messages[i] = byte_mutation(
        rng, messages[i], [table, PROBE_TABLE]
      )
      prefix = (
        good_insert(rng, rng.choice(TABLE_NAMES)).serialized()
        if rng.random() < 0.3
        else []
      )
      return Case(
        index,
        'InsertStream',
        kind,
        f'message {len(prefix) + i} of {len(prefix) + len(messages)}: {detail}',
        prefix + messages,
      )
    choice = rng.randrange(3)
    if choice == 0:
      return Case(
        index,
        'InsertStream',
        'cancel.after_first_confirmation',
        'valid messages, cancelled after the first response',
        b.serialized(),
        cancel='after_first_response',
      )
    if choice == 1:
      chunks = [c for m in b.messages for c in m.chunks]
      return Case(
        index,
        'InsertStream',
        'cancel.with_chunks_pending',
        'chunk-only message, stream cancelled 50 ms later',
        [rs.InsertStreamRequest(chunks=chunks).SerializeToString()],
        cancel='after_delay',
      )
    return Case(
      index,
      'InsertStream',
      'cancel.idle_stream',
      'no message, cancelled 50 ms in',
      [],
      cancel='after_delay',
    )

  def case_SampleStream(self, rng: random.Random, index: int) -> Case:  # pylint: disable=invalid-name
    """Valid, field- or byte-mutated, multi-request and cancelled SampleStreams."""
    table = rng.choice(TABLE_NAMES)
    metadata = CODECS_METADATA if rng.random() < 0.5 else ()
    n = rng.choice([1, 2, 5, 16, 64])
    good = sample_request(table, n, rng.choice([200, 1000]))
    r = rng.random()
    if r < 0.3:
      return Case(
        index,
        'SampleStream',
        'good',
        f'{n} samples of {table}',
        [good],
        deadline=20.0,
        metadata=metadata,
        good=True,
      )
    if r < 0.62:
      choice = rng.randrange(9)
      if choice == 0:
        name = rng.choice(['nope', '', 'x' * 5000, 'uniform\x00', 'Uniform'])
        return Case(
          index,
          'SampleStream',
          'sample.unknown_table',
          f'table {name[:20]!r}',
          [sample_request(name, n, 200)],
          metadata=metadata,
        )
      if choice == 1:
        bad = rng.choice([0, -1, -(2**63)])
        return Case(
          index,
          'SampleStream',
          'sample.num_samples_not_positive',
          f'num_samples={bad} of {table}',
          [sample_request(table, bad, 200)],
        )
      if choice == 2:
        timeout = rng.choice([0, -1, -(2**63), None])
        return Case(
          index,
          'SampleStream',
          'sample.timeout_not_positive',
          f'rate_limiter_timeout={timeout} (infinite) for {n} of {table}',
          [sample_request(table, n, timeout)],
          deadline=3.0,
          may_block=True,
          metadata=metadata,
        )
      if choice == 3:
        timeout = rng.choice([2**62, 2**63 - 1])
        return Case(
          index,
          'SampleStream',
          'sample.timeout_huge',
          f'rate_limiter_timeout={timeout} ms for {n} of {table}',
          [sample_request(table, n, timeout)],
          deadline=3.0,
          may_block=True,
        )
      if choice == 4:
        return Case(
          index,
          'SampleStream',
          'sample.empty_table_times_out',
          'the (empty) probe table with a 100 ms timeout',
          [sample_request(PROBE_TABLE, 1, 100)],
          good=True,
        )
      if choice == 5:
        second = rng.choice(
          [good, sample_request(table, 0, 200), sample_request('nope', 1, 200)]
        )
        return Case(
          index,
          'SampleStream',
          'sample.several_requests',
          'two requests on one stream (the second valid, num_samples 0 or an unknown '
          'table)',
          [good, second],
          deadline=20.0,
          metadata=metadata,
        )
      if choice == 6:
        return Case(
          index,
          'SampleStream',
          'sample.no_request',
          'half-closed without a request',
          [],
          good=True,
        )
      if choice == 7:
        return Case(
          index,
          'SampleStream',
          'sample.reserved_field_4',
          'a valid request with the reserved field 4 set',
          [good + b'\x20\x01'],
          deadline=20.0,
          good=True,
        )
      return Case(
        index,
        'SampleStream',
        'sample.huge_num_samples',
        f'num_samples=2^62 of {table}, cancelled after the first response',
        [sample_request(table, 2**62, 1000)],
        deadline=20.0,
        cancel='after_first_response',
        metadata=metadata,
      )
    if r < 0.87:
      kind, detail, data = byte_mutation(rng, good, [table])
      return Case(
        index,
        'SampleStream',
        kind,
        f'{detail} (of {n} samples of {table})',
        [data],
        deadline=20.0,
      )
    if rng.random() < 0.5:
      return Case(
        index,
        'SampleStream',
        'cancel.blocked_sample',
        'the empty probe table without a timeout, cancelled 50 ms in',
        [sample_request(PROBE_TABLE, 1, None)],
        cancel='after_delay',
      )
    return Case(
      index,
      'SampleStream',
      'cancel.idle_stream',
      'no request, cancelled 50 ms in',
      [],
      cancel='after_delay',
    )

  def case_MutatePriorities(self, rng: random.Random, index: int) -> Case:  # pylint: disable=invalid-name
    """Valid and mutated MutatePriorities calls."""
    table = rng.choice(ALL_TABLES)
    known = self.known_keys(table)
    pick = lambda k: [
      rng.choice(known) if known else rng.getrandbits(64) for _ in range(k)
    ]
    request = rs.MutatePrioritiesRequest(table=table)
    r = rng.random()
    if r < 0.3:
      for key in pick(rng.randint(1, 5)):
        request.updates.add(key=key, priority=rng.choice([0.5, 1.0, 2.0, 0.0]))
      request.delete_keys.extend(rng.getrandbits(64) for _ in range(2))
      return Case(
        index,
        'MutatePriorities',
        'good',
        f'updates of {table}',
        [request.SerializeToString()],
        good=True,
      )
    if r < 0.75:
      choice = rng.randrange(8)
      if choice == 0:
        request.table = rng.choice(['nope', '', 'y' * 5000, 'heap '])
        request.updates.add(key=1, priority=1.0)
        kind, detail = 'mutate.unknown_table', f'table {request.table[:20]!r}'
      elif choice == 1:
        priority = rng.choice(
          [math.nan, -1.0, math.inf, -math.inf, -0.0, 1e308, -5e-324]
        )
        for key in pick(2):
          request.updates.add(key=key, priority=priority)
        kind, detail = (
          'mutate.priority_special',
          f'priority {priority!r} for items of {table}',
        )
      elif choice == 2:
        request.updates.add(key=rng.getrandbits(64), priority=1.0)
        request.delete_keys.extend([rng.getrandbits(64), 0, 2**64 - 1])
        kind, detail = 'mutate.unknown_keys', f'keys absent from {table}'
      elif choice == 3:
        key = pick(1)[0]
        for p in (1.0, 2.0, 3.0):
          request.updates.add(key=key, priority=p)
        kind, detail = (
          'mutate.duplicate_keys',
          f'one key of {table} updated three times',
        )
      elif choice == 4:
        key = pick(1)[0]
        request.updates.add(key=key, priority=1.0)
        request.delete_keys.append(key)
        kind, detail = (
          'mutate.update_and_delete_same_key',
          f'one key of {table}',
        )
      elif choice == 5:
        for _ in range(20000):
          request.updates.add(key=rng.getrandbits(64), priority=1.0)
        request.delete_keys.extend(rng.getrandbits(64) for _ in range(20000))
        kind, detail = (
          'mutate.many_keys',
          f'20000 updates and deletes of absent keys ({table})',
        )
      elif choice == 6:
        request.delete_keys.extend(pick(rng.randint(1, 3)))
        kind, detail = (
          'mutate.delete_items',
          f'deletes of items of {table} (valid)',
        )
      else:
        kind, detail = (
          'mutate.empty_request',
          f'no updates, no deletes ({table}, valid)',
        )
      return Case(
        index,
        'MutatePriorities',
        kind,
        detail,
        [request.SerializeToString()],
        deadline=20.0,
      )
    request.updates.add(key=pick(1)[0], priority=1.5)
    kind, detail, data = byte_mutation(
      rng, request.SerializeToString(), [table]
    )
    return Case(
      index, 'MutatePriorities', kind, f'{detail} (update of {table})', [data]
    )

  def case_Reset(self, rng: random.Random, index: int) -> Case:  # pylint: disable=invalid-name
    """Valid (rarely), unknown-table and byte-mutated Resets."""
    r = rng.random()
    if r < 0.2:
      table = rng.choice(
        ['heap', 'fifo', PROBE_TABLE, 'heap', 'fifo', 'uniform']
      )
      return Case(
        index,
        'Reset',
        'good',
        f'Reset {table}',
        [rs.ResetRequest(table=table).SerializeToString()],
        good=True,
        deadline=20.0,
      )
    if r < 0.5:
      name = rng.choice(['nope', '', 'z' * 5000, 'fifo\x00'])
      return Case(
        index,
        'Reset',
        'reset.unknown_table',
        f'table {name[:20]!r}',
        [rs.ResetRequest(table=name).SerializeToString()],
      )
    table = rng.choice(['nope', 'heap', 'fifo'])
    kind, detail, data = byte_mutation(
      rng, rs.ResetRequest(table=table).SerializeToString(), [table]
    )
    return Case(
      index, 'Reset', kind, f'{detail} (Reset {table})', [data], deadline=20.0
    )

  def case_Checkpoint(self, rng: random.Random, index: int) -> Case:  # pylint: disable=invalid-name
    """Valid and byte-mutated Checkpoint requests."""
    if rng.random() < 0.35:
      return Case(
        index,
        'Checkpoint',
        'good',
        'Checkpoint',
        [b''],
        deadline=60.0,
        good=True,
      )
    kind, detail, data = byte_mutation(rng, b'')
    return Case(index, 'Checkpoint', kind, detail, [data], deadline=60.0)

  def case_ServerInfo(self, rng: random.Random, index: int) -> Case:  # pylint: disable=invalid-name
    """Valid and byte-mutated ServerInfo requests."""
    if rng.random() < 0.3:
      return Case(index, 'ServerInfo', 'good', 'ServerInfo', [b''], good=True)
    kind, detail, data = byte_mutation(rng, b'')
    return Case(index, 'ServerInfo', kind, detail, [data])

  def case_InitializeConnection(self, rng: random.Random, index: int) -> Case:  # pylint: disable=invalid-name
    """Valid, mutated and cancelled InitializeConnection streams."""
    table = rng.choice(TABLE_NAMES)
    pid = self.server.pid if rng.random() < 0.5 else rng.randint(1, 2**31)
    good = rs.InitializeConnectionRequest(
      pid=pid, table_name=table
    ).SerializeToString()
    r = rng.random()
    if r < 0.3:
      return Case(
        index,
        'InitializeConnection',
        'good',
        f'pid {pid}, table {table}',
        [good],
        good=True,
      )
    if r < 0.65:
      choice = rng.randrange(5)
      if choice == 0:
        name = rng.choice(['nope', '', 'w' * 5000])
        request = rs.InitializeConnectionRequest(pid=pid, table_name=name)
        return Case(
          index,
          'InitializeConnection',
          'init.unknown_table',
          f'table {name[:20]!r}',
          [request.SerializeToString()],
        )
      if choice == 1:
        odd = rng.choice([-1, 0, 2**63 - 1, -(2**63)])
        request = rs.InitializeConnectionRequest(pid=odd, table_name=table)
        return Case(
          index,
          'InitializeConnection',
          'init.odd_pid',
          f'pid {odd}',
          [request.SerializeToString()],
          good=True,
        )
      if choice == 2:
        request = rs.InitializeConnectionRequest(
          pid=pid, table_name=table, ownership_transferred=True
        )
        return Case(
          index,
          'InitializeConnection',
          'init.ownership_first',
          'ownership_transferred=true in the first message',
          [request.SerializeToString()],
        )
      if choice == 3:
        return Case(
          index,
          'InitializeConnection',
          'init.several_messages',
          'three requests on one stream',
          [good, good, good],
        )
      return Case(
        index,
        'InitializeConnection',
        'init.no_message',
        'half-closed at once',
        [],
        good=True,
      )
    if r < 0.85:
      kind, detail, data = byte_mutation(rng, good, [table])
      return Case(index, 'InitializeConnection', kind, detail, [data])
    if rng.random() < 0.5:
      return Case(
        index,
        'InitializeConnection',
        'cancel.after_first_response',
        'valid request, stream left open, cancelled after the response',
        [good],
        cancel='after_first_response',
      )
    return Case(
      index,
      'InitializeConnection',
      'cancel.idle_stream',
      'no message, cancelled 50 ms in',
      [],
      cancel='after_delay',
    )

  # ---- phases

  def baseline(self, quick: bool = False) -> None:
    """Valid items into every table: hand-built (both codecs, both chunk
    layouts, strings, delta encoding) and written by tf_reverb's writers."""
    rng = random.Random(f'{self.seed}/baseline/{self.incarnation}')
    for table in TABLE_NAMES:
      for _ in range(3 if quick else 8):
        b = good_insert(rng, table)
        self.run_case(
          Case(
            -1,
            'InsertStream',
            'baseline',
            f'valid items into {table}',
            b.serialized(),
            good=True,
            chunks=b.chunks,
          )
        )
    if not quick:
      self.writer_traffic('baseline', priority=1.0)

  def writer_traffic(self, kind: str, priority: float) -> None:
    """Inserts with tf_reverb's TrajectoryWriter (zstd for every chunk) and
    Client.insert into 'heap' and, when `priority` is highest, samples them
    back with Client.sample."""
    import tf_reverb as reverb  # pylint: disable=g-import-not-at-top

    client = reverb.Client(self.server.address)
    steps = [
      {'action': np.int32(t), 'obs': np.arange(3, dtype=np.float32) + t}
      for t in range(6)
    ]
    old = os.environ.get('TF_REVERB_ZSTD')
    os.environ['TF_REVERB_ZSTD'] = 'always'
    try:
      with client.trajectory_writer(num_keep_alive_refs=4) as writer:
        for step in steps:
          writer.append(step)
          if writer.episode_steps >= 3:
            writer.create_item(
              'prioritized',
              1.0,
              {
                'action': writer.history['action'][-3:],
                'obs': writer.history['obs'][-3:],
              },
            )
        writer.create_item(
          'heap', priority, {'obs': writer.history['obs'][-4:]}
        )
        writer.flush(timeout_ms=30000)
      if priority > 1e8:
        sample = next(client.sample('heap', emit_timesteps=False, timeout=30))
        want = np.stack([s['obs'] for s in steps[-4:]])
        if not np.array_equal(
          sample.data['obs']
          if isinstance(sample.data, dict)
          else sample.data[0],
          want,
        ):
          self.fail(
            AFTERWARDS,
            'OK',
            f'TrajectoryWriter item sampled back as {sample.data!r}',
            method='tf_reverb',
            kind=f'{kind}.trajectory_writer',
            reproducer='',
          )
      data = [
        np.arange(6, dtype=np.int64).reshape(2, 3),
        np.array([b'ab', b'c'], dtype=object),
      ]
      client.insert(data, {'uniform': 1.0, 'heap': priority * 2})
      if priority > 1e8:
        sample = next(client.sample('heap', emit_timesteps=False, timeout=30))
        got = sample.data
        if not (
          np.array_equal(got[0], data[0][None])
          and list(got[1][0]) == [b'ab', b'c']
        ):
          self.fail(
            AFTERWARDS,
            'OK',
            f'Client.insert item sampled back as {got!r}',
            method='tf_reverb',
            kind=f'{kind}.client_insert',
            reproducer='',
          )
    except Exception as e:  # pylint: disable=broad-except
      self.fail(
        AFTERWARDS if kind != 'baseline' else VALID_FAILED,
        type(e).__name__,
        str(e),
        method='tf_reverb',
        kind=f'{kind}.writers',
        reproducer=repr(e),
      )
    finally:
      if old is None:
        os.environ.pop('TF_REVERB_ZSTD', None)
      else:
        os.environ['TF_REVERB_ZSTD'] = old

  def table_sizes(self, client: RawClient) -> Optional[Dict[str, int]]:
    """current_size of every table, None if ServerInfo fails."""
    out = client.call('ServerInfo', [b''], 20.0)
    if out.code != grpc.StatusCode.OK:
      return None
    info = rs.ServerInfoResponse.FromString(out.responses[0])
    return {t.name: t.current_size for t in info.table_info}

  def sweep(self, client: RawClient, label: str) -> None:
    """Samples (and then deletes) every item of every table; all must decode."""
    for table in ('prioritized', 'heap'):  # every item gets a chance
      keys = list(dict.fromkeys(self.keys_by_table[table]))
      for i in range(0, len(keys), 5000):
        request = rs.MutatePrioritiesRequest(table=table)
        for key in keys[i : i + 5000]:
          request.updates.add(key=key, priority=1.0)
        out = client.call(
          'MutatePriorities', [request.SerializeToString()], 60.0
        )
        if out.code != grpc.StatusCode.OK:
          self.fail(
            SWEEP,
            out.code,
            f'{label}: resetting priorities: {out.details}',
            method='MutatePriorities',
            kind=f'sweep.{table}',
            reproducer='',
          )
    total = 0
    for table in ALL_TABLES:
      deterministic = table in ('fifo', 'heap', PROBE_TABLE)
      swept: Set[int] = set()
      for _ in range(1500):
        sizes = self.table_sizes(client)
        if sizes is None:
          self.fail(
            SWEEP,
            'ServerInfo failed',
            label,
            method='ServerInfo',
            kind=f'sweep.{table}',
            reproducer='',
          )
          return
        if sizes.get(table, 0) == 0:
          break
        n = 1 if deterministic else min(64, sizes[table])
        out = client.call(
          'SampleStream', [sample_request(table, n, 5000)], 60.0
        )
        case = Case(
          -3,
          'SampleStream',
          f'sweep.{table}',
          f'{label}: {n} samples of {table}',
          [sample_request(table, n, 5000)],
        )
        items = self.verify_samples(case, out, label=f'sweep.{table}')
        if out.code != grpc.StatusCode.OK or not items:
          left = [
            k
            for k in dict.fromkeys(self.keys_by_table[table])
            if k not in swept
          ]
          kinds = sorted(
            {
              o.kind
              for k in left
              for t, o in self.origins.get(k, [])
              if t == table
            }
          )
          self.fail(
            SWEEP,
            out.code,
            f'{label}: sampling {table} with {sizes[table]} items '
            f'left failed: {out.details!r}; the items left were inserted by '
            f'mutations {kinds[:12]}',
            case,
          )
          break
        keys = list(dict.fromkeys(i.info.item.key for i in items))
        swept.update(keys)
        total += len(keys)
        request = rs.MutatePrioritiesRequest(table=table, delete_keys=keys)
        client.call('MutatePriorities', [request.SerializeToString()], 60.0)
      else:
        self.fail(
          SWEEP,
          'OK',
          f'{label}: {table} not empty after 1500 rounds',
          method='SampleStream',
          kind=f'sweep.{table}',
          reproducer='',
        )
    self.report.notes.append(
      f'{label}: swept {total} items, all tables emptied'
    )

  def final(self) -> None:
    """Checkpoint, sweep, good traffic, and the restored checkpoint's sweep."""
    self.case = None
    out = self.client.call('Checkpoint', [b''], 120.0)
    sizes = self.table_sizes(self.client)
    checkpointed = out.code == grpc.StatusCode.OK
    if not checkpointed:
      self.fail(
        RESTORE,
        out.code,
        f'final Checkpoint: {out.details}',
        method='Checkpoint',
        kind='final.checkpoint',
        reproducer='',
      )
    self.sweep(self.client, 'fuzzed server')
    rng = random.Random(f'{self.seed}/after')
    for table in TABLE_NAMES:
      b = good_insert(rng, table, items=1)
      key = b.items()[0][1].key
      self.run_case(
        Case(
          -2,
          'InsertStream',
          'after.good_insert',
          f'a valid item into {table}',
          b.serialized(),
          good=True,
          chunks=b.chunks,
        )
      )
      case = Case(
        -2,
        'SampleStream',
        'after.good_sample',
        f'1 sample of {table}',
        [sample_request(table, 1, 5000)],
        deadline=20.0,
        good=True,
      )
      out = self.client.call(case.method, case.messages, case.deadline)
      self.check_outcome(case, out)
      items = self.verify_samples(case, out)
      if [i.info.item.key for i in items] != [key]:
        self.fail(
          AFTERWARDS,
          out.code,
          f'sampled {[i.info.item.key for i in items]} from the '
          f'emptied {table}, not the new item {key}: {out.details}',
          case,
        )
    self.writer_traffic('after', priority=1e9)
    if not checkpointed:
      return
    try:
      restored = FuzzServer(
        self.workdir, self.server.checkpoint_dir, name='restored'
      )
    except AssertionError as e:
      self.fail(
        RESTORE,
        'no start',
        str(e)[-2000:],
        method='reverb_server',
        kind='final.restore',
        reproducer='--checkpoint_dir of the fuzzed server',
      )
      return
    client = RawClient(restored.address)
    try:
      got = self.table_sizes(client)
      if got != sizes:
        self.fail(
          RESTORE,
          'OK',
          f'restored table sizes {got}, checkpointed {sizes}',
          method='reverb_server',
          kind='final.restore',
          reproducer='',
        )
      self.sweep(client, 'restored server')
    finally:
      client.close()
      restored.stop()

  def run(self) -> Report:
    """The whole fuzz: baseline, the cases, the final checks."""
    start = time.monotonic()
    self.start_server()
    try:
      self.baseline()
      for index in range(self.requests):
        self.run_case(self.make_case(index))
        if index % 250 == 249:
          self.log(
            f'grpc fuzz: {index + 1}/{self.requests} requests, '
            f'{len(self.report.failures)} failures, {time.monotonic() - start:.0f}s'
          )
      self.final()
    finally:
      self.stop_server()
      self.report.elapsed = time.monotonic() - start
    return self.report


def main(argv: Sequence[str]) -> int:
  """`show SEED INDEX`: what fuzz case INDEX of SEED sends; `send SEED INDEX
  HOST:PORT`: sends it to a server and prints how the call ended. (Cases
  that name existing items or the server's pid use stand-ins here.)"""
  if len(argv) < 3 or argv[0] not in ('show', 'send'):
    print(main.__doc__)
    return 2
  fuzzer = Fuzzer('/tmp', int(argv[1]), 0)

  class _StandIn:
    pid = os.getpid()

  fuzzer.server = _StandIn()  # type: ignore[assignment]
  case = fuzzer.make_case(int(argv[2]))
  print(case.describe())
  for n, m in enumerate(case.messages):
    try:
      text = (
        str(REQUEST_TYPES[case.method].FromString(m))[:3000]
        if parsable(case.method, m)
        else ''
      )
    except pb_message.DecodeError:
      text = ''
    print(
      f'--- message {n}: {len(m)} bytes{"" if text else " (unparsable)"}\n{text or m[:512].hex()}'
    )
  if argv[0] == 'send':
    client = RawClient(argv[3])
    out = client.call(
      case.method,
      case.messages,
      case.deadline,
      case.metadata,
      case.cancel,
      case.half_close,
    )
    print(
      f'=> {out.code.name} {out.details!r} after {out.elapsed:.2f}s, '
      f'{len(out.responses)} responses'
    )
    client.close()
  return 0
