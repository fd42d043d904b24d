"""The files and metadata every installable package carries.

LICENSE (the Apache License 2.0) and the package metadata that names it; the
PEP 561 marker tf_reverb/py.typed, shipped as package data; one version,
defined in tf_reverb/_version.py and read by setup.py; an ``__all__`` in every
public module whose names exist and are documented; ``import tf_reverb`` and
``from tf_reverb import *`` without TensorFlow; and the writer factories of
``Client`` annotated with the classes they return.

setup.py is only ever asked for metadata here (``--version``, ``egg_info``):
neither runs its build_py, so no native build starts.
"""

import ast
import glob
import hashlib
import importlib
import inspect
import os
import subprocess
import sys
import typing

import numpy as np
import pytest

from conftest import BLOCK_TENSORFLOW
from conftest import ROOT
from conftest import run_python
import tf_reverb as reverb

SETUP = os.path.join(ROOT, 'setup.py')
PACKAGE = os.path.join(ROOT, 'tf_reverb')

# SHA-256 of the Apache License 2.0 as the ASF publishes it (LICENSE-2.0.txt),
# the text LICENSE carries below its copyright line.
APACHE_2_SHA256 = (
  'cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30'
)
COPYRIGHT = 'Copyright 2026 the tf_reverb authors.'
PYTHONS = ('3.10', '3.11', '3.12', '3.13')


def _setup_query(*options: str) -> str:
  """What `python setup.py <display options>` prints (metadata only)."""
  result = subprocess.run(
    [sys.executable, SETUP, *options],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=120,
  )
  assert result.returncode == 0, result.stderr
  return result.stdout


@pytest.fixture(scope='module')
def pkg_info(tmp_path_factory):
  """PKG-INFO and SOURCES.txt of `setup.py egg_info` into a scratch dir."""
  base = tmp_path_factory.mktemp('egg')
  result = subprocess.run(
    [sys.executable, SETUP, '-q', 'egg_info', '--egg-base', str(base)],
    cwd=ROOT,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode == 0, result.stderr
  info = base / 'tf_reverb.egg-info'
  return (
    (info / 'PKG-INFO').read_text(encoding='utf-8'),
    (info / 'SOURCES.txt').read_text(encoding='utf-8').split(),
  )


def _headers(pkg_info_text: str) -> typing.List[typing.Tuple[str, str]]:
  """The `Name: value` header lines of PKG-INFO (before the description)."""
  headers = []
  for line in pkg_info_text.split('\n'):
    if not line.strip():
      break
    if ': ' in line and not line.startswith(' '):
      name, value = line.split(': ', 1)
      headers.append((name, value))
  return headers


# LICENSE and the license metadata.


def test_license_is_the_apache_license_2_0():
  with open(os.path.join(ROOT, 'LICENSE'), encoding='utf-8') as f:
    text = f.read()
  first, rest = text.split('\n', 1)
  assert first == COPYRIGHT
  # The license text itself, unaltered (it starts with a blank line).
  assert hashlib.sha256(rest.encode()).hexdigest() == APACHE_2_SHA256
  assert (
    'Apache License\n                           Version 2.0, January 2004'
    in rest
  )
  assert 'END OF TERMS AND CONDITIONS' in rest


def test_setup_names_the_license_and_the_supported_pythons():
  lines = _setup_query('--license', '--classifiers').splitlines()
  assert lines[0] == 'Apache-2.0'
  classifiers = lines[1:]
  assert 'License :: OSI Approved :: Apache Software License' in classifiers
  assert 'Operating System :: POSIX :: Linux' in classifiers
  assert (
    'Topic :: Scientific/Engineering :: Artificial Intelligence' in classifiers
  )
  assert any(c.startswith('Development Status :: ') for c in classifiers)
  assert any(c.startswith('Intended Audience :: ') for c in classifiers)
  versions = sorted(
    c.rsplit(' :: ', 1)[1]
    for c in classifiers
    if c.startswith('Programming Language :: Python :: 3.')
  )
  assert versions == list(PYTHONS)


def test_metadata_carries_license_file_and_readme_and_no_outside_urls(pkg_info):
  text, _ = pkg_info
  headers = _headers(text)
  names = [name for name, _ in headers]
  assert ('License', 'Apache-2.0') in headers
  assert ('License-File', 'LICENSE') in headers
  assert ('Description-Content-Type', 'text/markdown') in headers
  assert 'Project-URL' not in names and 'Home-page' not in names, headers
  with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as f:
    readme_title = f.readline().strip()
  assert readme_title == '# tf_reverb'
  # The long description (the body after the headers) is README.md.
  assert '\n\n' + readme_title + '\n' in text


# py.typed.


def test_py_typed_marker_is_shipped_as_package_data(pkg_info):
  marker = os.path.join(PACKAGE, 'py.typed')
  assert os.path.isfile(marker) and os.path.getsize(marker) == 0
  # setup.py lists it beside the native files it already ships ...
  with open(SETUP, encoding='utf-8') as f:
    tree = ast.parse(f.read())
  package_data = [
    node.value
    for node in ast.walk(tree)
    if isinstance(node, ast.keyword) and node.arg == 'package_data'
  ]
  assert len(package_data) == 1
  data = ast.literal_eval(
    ast.unparse(package_data[0]).replace(
      'KERNEL_GLOB', repr('libtf_reverb_ops*.so')
    )
  )
  assert {'py.typed', 'pybind.so', 'bin/reverb_server'} <= set(
    data['tf_reverb']
  )
  assert data['tf_reverb.ops'] == ['libtf_reverb_ops*.so']
  # ... and setuptools finds it: the distribution's file list holds it.
  _, sources = pkg_info
  assert 'tf_reverb/py.typed' in sources
  assert 'LICENSE' in sources


# The version.


def test_version_is_defined_once_and_setup_reads_it():
  assert isinstance(reverb.__version__, str)
  assert reverb.__version__.split('.')[0].isdigit(), reverb.__version__
  assert _setup_query('--version').strip() == reverb.__version__
  from tf_reverb import _version  # pylint: disable=g-import-not-at-top

  assert reverb.__version__ is _version.__version__
  # No other copy of the version string in setup.py or the package sources.
  literal = repr(reverb.__version__)
  holders = []
  for path in [
    SETUP,
    *glob.glob(os.path.join(PACKAGE, '**', '*.py'), recursive=True),
  ]:
    if path.endswith(('_pb2.py', '_pb2_grpc.py')):
      continue
    with open(path, encoding='utf-8') as f:
      if literal in f.read():
        holders.append(os.path.relpath(path, ROOT))
  assert holders == ['tf_reverb/_version.py']


def test_setup_read_version_parses_without_importing(tmp_path):
  sys.path.insert(0, ROOT)
  try:
    setup_module = importlib.import_module('setup')
  finally:
    sys.path.remove(ROOT)
  version_file = tmp_path / '_version.py'
  version_file.write_text(
    '"""Doc."""\n\nimport nothing_importable\n__version__ = \'9.8.7rc1\'\n'
  )
  assert setup_module.read_version(str(version_file)) == '9.8.7rc1'
  version_file.write_text('VERSION = 1\n')
  with pytest.raises(RuntimeError, match='assigns no __version__'):
    setup_module.read_version(str(version_file))


# __all__ of the public modules.


def _public_modules() -> typing.Dict[str, str]:
  """Dotted name -> file of every public module: tf_reverb's modules with no
  part of the name starting with an underscore, generated *_pb2 modules
  excluded (the rule of docs/hooks.py), and the top-level alias module."""
  modules = {
    'tf_reverb_as_reverb': os.path.join(ROOT, 'tf_reverb_as_reverb.py')
  }
  for path in sorted(
    glob.glob(os.path.join(PACKAGE, '**', '*.py'), recursive=True)
  ):
    parts = os.path.relpath(path, ROOT)[: -len('.py')].split(os.sep)
    if parts[-1] == '__init__':
      parts = parts[:-1]
    if any(part.startswith('_') for part in parts[1:]):
      continue
    if any(part.endswith(('_pb2', '_pb2_grpc')) for part in parts):
      continue
    modules['.'.join(parts)] = path
  return modules


PUBLIC_MODULES = _public_modules()


def _module_all(path: str) -> typing.Optional[typing.List[str]]:
  """The literal `__all__ = [...]` of a module's source, or None."""
  with open(path, encoding='utf-8') as f:
    tree = ast.parse(f.read())
  for node in tree.body:
    if isinstance(node, ast.Assign) and any(
      isinstance(t, ast.Name) and t.id == '__all__' for t in node.targets
    ):
      return ast.literal_eval(node.value)
  return None


def _attribute_docstrings(module) -> typing.Dict[str, str]:
  """name -> the string literal right after its module-level assignment
  (an attribute docstring, which mkdocstrings shows)."""
  try:
    source = inspect.getsource(module)
  except (OSError, TypeError):
    return {}
  body = ast.parse(source).body
  docs = {}
  for node, following in zip(body, body[1:]):
    if (
      isinstance(node, (ast.Assign, ast.AnnAssign))
      and isinstance(following, ast.Expr)
      and isinstance(following.value, ast.Constant)
      and isinstance(following.value.value, str)
    ):
      targets = node.targets if isinstance(node, ast.Assign) else [node.target]
      for target in targets:
        if isinstance(target, ast.Name):
          docs[target.id] = following.value.value
  return docs


# Public modules over optional dependencies (extras of setup.py).
_OPTIONAL_DEPENDENCIES = {
  'tf_reverb.ray': 'ray',
  'tf_reverb.torch': 'torch',
  'tf_reverb.jax': 'jax',
}


def _import(module_name: str):
  if module_name in _OPTIONAL_DEPENDENCIES:
    pytest.importorskip(_OPTIONAL_DEPENDENCIES[module_name])
  return importlib.import_module(module_name)


def test_the_public_modules_are_found():
  for name in (
    'tf_reverb',
    'tf_reverb.client',
    'tf_reverb.server',
    'tf_reverb.platform.checkpointers_lib',
    'tf_reverb.cc',
    'tf_reverb.server_executable.server_main',
    'tf_reverb.ops',
  ):
    assert name in PUBLIC_MODULES
  assert not any('_pb2' in name or '._' in name for name in PUBLIC_MODULES)


@pytest.mark.parametrize('module_name', sorted(PUBLIC_MODULES))
def test_public_module_has_an_all_of_real_documented_names(module_name):
  names = _module_all(PUBLIC_MODULES[module_name])
  assert names is not None, f'{module_name} has no literal __all__'
  module = _import(module_name)
  assert module.__all__ == names
  assert len(set(names)) == len(names), f'duplicates in {names}'
  # `import *` binds exactly these names (submodules are imported by it).
  namespace = {}
  exec(f'from {module_name} import *', namespace)  # pylint: disable=exec-used
  assert set(namespace) - {'__builtins__'} == set(names)
  own_docs = _attribute_docstrings(module)
  for name in names:
    assert not name.startswith('_'), name
    value = namespace[name]
    where = f'{module_name}.{name}'
    if inspect.ismodule(value):
      # A tf_reverb module (`selectors`), never a helper such as np or tf.
      assert value.__name__.startswith('tf_reverb'), (where, value)
      assert (value.__doc__ or '').strip(), f'{where} has no docstring'
    elif inspect.isclass(value) or inspect.isfunction(value):
      # Its own docstring (a class's, not inherited), else the attribute
      # docstring of its assignment here (`Config = ...` of a proto class).
      doc = (
        value.__dict__.get('__doc__')
        if inspect.isclass(value)
        else (value.__doc__)
      )
      doc = doc or own_docs.get(name)
      assert (doc or '').strip(), f'{where} has no docstring'
      if not own_docs.get(name):
        # Defined in tf_reverb, not an imported helper (typing.Any, ...).
        assert value.__module__.startswith('tf_reverb'), (where, value)
    else:
      # An alias or constant: documented where it is assigned.
      assert own_docs.get(name, '').strip(), (
        f'{where} ({value!r}) has no attribute docstring'
      )


# Import without TensorFlow (conftest.BLOCK_TENSORFLOW).


def test_import_and_import_star_do_not_import_tensorflow():
  run_python(
    'import sys\n'
    'import tf_reverb\n'
    "assert 'tensorflow' not in sys.modules, 'import tf_reverb'\n"
    'namespace = {}\n'
    "exec('from tf_reverb import *', namespace)\n"
    "assert 'tensorflow' not in sys.modules, 'from tf_reverb import *'\n"
    "bound = set(namespace) - {'__builtins__'}\n"
    'assert bound == set(tf_reverb.__all__), bound\n'
    "assert namespace['Client'] is tf_reverb.Client\n"
    "assert namespace['selectors'] is tf_reverb.item_selectors\n"
    # Accessing a lazy name is what imports TensorFlow.
    'tf_reverb.TFClient\n'
    "assert 'tensorflow' in sys.modules\n"
  )


def test_import_star_works_where_tensorflow_cannot_be_imported():
  result = run_python(
    BLOCK_TENSORFLOW + 'from tf_reverb import *\n'
    "table = Table('t', selectors.Uniform(), selectors.Fifo(), 10,\n"
    '              rate_limiters.MinSize(1))\n'
    'with Server([table]) as server:\n'
    "  client = Client(f'localhost:{server.port}')\n"
    "  client.insert([1.5], {'t': 1.0})\n"
    "  assert client.server_info()['t'].current_size == 1\n"
    'import tf_reverb\n'
    'try:\n'
    '  tf_reverb.TFClient\n'
    "  raise AssertionError('TFClient resolved without TensorFlow')\n"
    'except ImportError:\n'
    "  print('lazy names need TensorFlow')\n"
  )
  assert 'lazy names need TensorFlow' in result.stdout


def test_top_level_all_leaves_the_lazy_names_out_but_keeps_them_reachable():
  # pylint: disable=protected-access
  lazy = set(reverb._LAZY_NAMES) | set(reverb._LAZY_MODULES)
  assert lazy.isdisjoint(reverb.__all__)
  assert lazy <= set(dir(reverb))
  for name in reverb._LAZY_NAMES:
    value = getattr(reverb, name)
    assert value.__module__ == reverb._LAZY_NAMES[name], name
  # Every class or function of tf_reverb bound at the top level is in
  # __all__ (a new re-export cannot be forgotten there).
  exported = {
    name
    for name, value in vars(reverb).items()
    if not name.startswith('_')
    and name not in lazy
    and (inspect.isclass(value) or inspect.isfunction(value))
    and value.__module__.startswith('tf_reverb')
  }
  assert exported <= set(reverb.__all__), exported - set(reverb.__all__)
  for name in (
    'Client',
    'Server',
    'Table',
    'TrajectoryWriter',
    'Writer',
    'NumpyIterator',
    'selectors',
    'rate_limiters',
    'structured',
  ):
    assert name in reverb.__all__, name


def test_type_checkers_see_the_lazy_names():
  """The `if TYPE_CHECKING:` imports of tf_reverb/__init__.py name exactly
  the lazy names, as the objects __getattr__ returns."""
  with open(os.path.join(PACKAGE, '__init__.py'), encoding='utf-8') as f:
    tree = ast.parse(f.read())
  blocks = [
    node
    for node in tree.body
    if isinstance(node, ast.If) and ast.unparse(node.test) == 'TYPE_CHECKING'
  ]
  assert len(blocks) == 1
  imported = {}
  for node in blocks[0].body:
    assert isinstance(node, ast.ImportFrom), ast.unparse(node)
    for alias in node.names:
      # `x as x`: re-exported for type checkers.
      assert alias.asname == alias.name, ast.unparse(node)
      imported[alias.name] = (node.module, alias.name)
  # pylint: disable=protected-access
  assert set(imported) == set(reverb._LAZY_NAMES) | set(reverb._LAZY_MODULES)
  for name, (module, attribute) in imported.items():
    source = importlib.import_module(module)
    assert getattr(source, attribute) is getattr(reverb, name), name


# Precise return types.


def test_writer_factories_are_annotated_with_the_classes_they_return():
  from tf_reverb import structured_writer  # pylint: disable=g-import-not-at-top

  expected = {
    'trajectory_writer': reverb.TrajectoryWriter,
    'structured_writer': structured_writer.StructuredWriter,
    'writer': reverb.Writer,
  }
  for method, cls in expected.items():
    hints = typing.get_type_hints(getattr(reverb.Client, method))
    assert hints['return'] is cls, (method, hints['return'])
  hints = typing.get_type_hints(reverb.Client.structured_writer)
  assert hints['configs'] == typing.Sequence[structured_writer.Config]

  # And the methods do return those classes.
  table = reverb.Table(
    't',
    reverb.selectors.Uniform(),
    reverb.selectors.Fifo(),
    10,
    reverb.rate_limiters.MinSize(1),
  )
  with reverb.Server([table]) as server:
    client = reverb.Client(f'localhost:{server.port}')
    writers = {
      'trajectory_writer': client.trajectory_writer(1),
      'writer': client.writer(1),
      'structured_writer': client.structured_writer(
        [
          structured_writer.create_config(
            structured_writer.create_reference_step([0.0])[0][-1:], 't'
          )
        ]
      ),
    }
    for method, writer in writers.items():
      assert type(writer) is expected[method], (method, type(writer))
    writers['trajectory_writer'].close()
    writers['writer'].close()
    del writers


def test_other_precise_annotations():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from tf_reverb import tensor_spec  # pylint: disable=g-import-not-at-top

  for method in ('append', 'flush', 'end_episode'):
    hints = typing.get_type_hints(getattr(reverb.TFStructuredWriter, method))
    assert hints['return'] == typing.Optional[tf.Operation], method
  hints = typing.get_type_hints(tensor_spec.DType.as_numpy_dtype.fget)
  assert hints['return'] == typing.Type[np.generic]
  for name in ('float32', 'int64', 'string', 'bool'):
    assert issubclass(tensor_spec.as_dtype(name).as_numpy_dtype, np.generic)
