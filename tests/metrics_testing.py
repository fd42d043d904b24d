"""Helpers of the metrics tests: a reverb_server binary with --metrics_port,
/metrics fetched over HTTP and parsed from Prometheus' text format."""

import re
import signal
import subprocess
import time
import urllib.request
from typing import Dict, List, Optional, Tuple

from conftest import SERVER_BINARY

# name{label="value",...} value  (the text format's sample lines)
_SAMPLE = re.compile(
  r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\d+)?$'
)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

Sample = Tuple[str, Tuple[Tuple[str, str], ...]]


class MetricsText:
  """A parsed /metrics page: families (name -> type) and sample values."""

  def __init__(self, text: str):
    self.text = text
    self.types: Dict[str, str] = {}
    self.values: Dict[Sample, float] = {}
    for line in text.splitlines():
      if line.startswith('# TYPE '):
        _, _, name, kind = line.split(' ', 3)
        self.types[name] = kind
      elif line and not line.startswith('#'):
        match = _SAMPLE.match(line)
        assert match, f'not a sample line: {line!r}'
        labels = tuple(sorted(_LABEL.findall(match.group(3) or '')))
        self.values[(match.group(1), labels)] = float(match.group(4))

  def value(self, name: str, **labels: str) -> float:
    """The sample `name` with exactly `labels`; KeyError when absent."""
    return self.values[(name, tuple(sorted(labels.items())))]


def scrape(port: int) -> MetricsText:
  """GET http://127.0.0.1:port/metrics, parsed."""
  with urllib.request.urlopen(
    f'http://127.0.0.1:{port}/metrics', timeout=30
  ) as response:
    assert response.status == 200
    assert response.headers['Content-Type'].startswith('text/plain')
    return MetricsText(response.read().decode())


class MetricsServer:
  """reverb_server --port=0 --metrics_port=0 [args]; stderr kept line by line."""

  def __init__(self, *args: str):
    self.process = subprocess.Popen(
      [SERVER_BINARY, '--port=0', '--metrics_port=0', *args],
      stdout=subprocess.DEVNULL,
      stderr=subprocess.PIPE,
      text=True,
    )
    self.lines: List[str] = []
    self.port: Optional[int] = None
    self.metrics_port: Optional[int] = None
    for line in self.process.stderr:  # until the start line: no timed wait
      self.lines.append(line)
      match = re.search(r'event=started port=(\d+).* metrics_port=(\d+)', line)
      if match:
        self.port, self.metrics_port = int(match.group(1)), int(match.group(2))
        return
      if '"event":"started"' in line:
        self.port = int(re.search(r'"port":(\d+)', line).group(1))
        self.metrics_port = int(
          re.search(r'"metrics_port":(\d+)', line).group(1)
        )
        return
    self.process.kill()
    self.process.wait()
    raise AssertionError('server did not start:\n' + ''.join(self.lines))

  @property
  def address(self) -> str:
    return f'127.0.0.1:{self.port}'

  def stop(self) -> int:
    """SIGTERM (by pid); returns the exit code, keeps the rest of stderr."""
    if self.process.poll() is None:
      self.process.send_signal(signal.SIGTERM)
    _, rest = self.process.communicate(timeout=120)
    self.lines.extend(rest.splitlines(keepends=True))
    return self.process.returncode

  def kill(self) -> None:
    if self.process.poll() is None:
      self.process.kill()
      self.process.communicate()


def wait_until(condition, what: str, attempts: int = 600, pause: float = 0.05):
  """Polls `condition()` until it is truthy (a hang guard bounds it)."""
  for _ in range(attempts):
    result = condition()
    if result:
      return result
    time.sleep(pause)
  raise AssertionError(f'gave up waiting for {what}')
