"""Runs code written for DeepMind Reverb (``import reverb``) on tf_reverb.

After ``install_as_reverb()``, ``import reverb``, ``from reverb import
structured_writer`` and every ``reverb.<submodule>`` resolve to tf_reverb's
own module objects (``reverb.trajectory_writer`` *is*
``tf_reverb.trajectory_writer``: one copy of each module and class).

Child processes (multiprocessing's spawn and forkserver, subprocesses) start
a new interpreter. The environment variable ``TF_REVERB_AS_REVERB`` reaches
them: the ``tf_reverb_as_reverb.pth`` file that tf_reverb installs into
site-packages calls ``install_from_environment()`` at interpreter start-up,
which does nothing unless the variable is set (``1``, or ``replace`` to
replace an installed dm-reverb). ``install_as_reverb()`` sets it for its own
children unless told not to.

This module is top-level (not inside ``tf_reverb``) so that the start-up
hook costs one small import and never loads tf_reverb's native core: the
alias imports tf_reverb only when ``reverb`` is first imported.

A real dm-reverb is never shadowed silently: when a module named ``reverb``
is installed (or already imported), ``install_as_reverb`` raises
``RuntimeError`` saying where it is, unless ``replace_dm_reverb=True``.
"""

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType
from typing import Optional, Sequence

__all__ = ['install_as_reverb']

# Environment variable of the start-up hook: unset/empty/"0" does nothing,
# "replace" replaces an installed dm-reverb, anything else installs the alias
# unless a dm-reverb is installed (then `import reverb` raises ImportError
# saying so).
ENV_VAR = 'TF_REVERB_AS_REVERB'

_ALIAS = 'reverb'
_TARGET = 'tf_reverb'


def _is_alias_name(fullname: str) -> bool:
  return fullname == _ALIAS or fullname.startswith(_ALIAS + '.')


def _other_reverb_location() -> Optional[str]:
  """Where a `reverb` module other than our alias would be imported from."""
  for finder in sys.meta_path:
    if isinstance(finder, _ReverbAliasFinder):
      continue
    find_spec = getattr(finder, 'find_spec', None)
    if find_spec is None:
      continue
    try:
      spec = find_spec(_ALIAS, None)
    except (ImportError, ValueError):
      continue
    if spec is not None:
      locations = list(spec.submodule_search_locations or [])
      return spec.origin or (locations[0] if locations else repr(spec))
  return None


def _describe_other_reverb(location: str) -> str:
  try:
    from importlib import metadata  # pylint: disable=g-import-not-at-top

    version = f'dm-reverb {metadata.version("dm-reverb")}'
  except Exception:  # pylint: disable=broad-except
    version = 'a module named reverb'
  return f'{version} is installed at {location}'


class _AliasLoader(importlib.abc.Loader):
  """Loads `reverb.X` as the already imported module `tf_reverb.X`."""

  def __init__(self, module: ModuleType):
    self._module = module
    self._spec = module.__spec__

  def create_module(self, spec):
    return self._module

  def exec_module(self, module: ModuleType) -> None:
    # The import system replaced __spec__ with the alias's spec; give the
    # module its own back (reload, pickling and tooling rely on it).
    module.__spec__ = self._spec


class _ReverbAliasFinder(importlib.abc.MetaPathFinder):
  """Resolves `reverb` and `reverb.*` to `tf_reverb` and `tf_reverb.*`.

  With `check_dm_reverb`, the first lookup refuses (ImportError) when a real
  `reverb` is installed: the start-up hook cannot raise at start-up.
  """

  def __init__(self, check_dm_reverb: bool):
    self._check_dm_reverb = check_dm_reverb

  def find_spec(
    self,
    fullname: str,
    path: Optional[Sequence[str]] = None,
    target: Optional[ModuleType] = None,
  ):
    if not _is_alias_name(fullname):
      return None
    if self._check_dm_reverb:
      location = _other_reverb_location()
      if location is not None:
        raise ImportError(
          f'{ENV_VAR} asks for tf_reverb under the name reverb, but '
          f'{_describe_other_reverb(location)}; refusing to shadow it. '
          f'Set {ENV_VAR}=replace to use tf_reverb anyway, or uninstall '
          'dm-reverb.',
          name=fullname,
        )
      self._check_dm_reverb = False
    target_name = _TARGET + fullname[len(_ALIAS) :]
    try:
      module = importlib.import_module(target_name)
    except ModuleNotFoundError as e:
      if e.name != target_name:
        raise
      raise ModuleNotFoundError(
        f'No module named {fullname!r}: tf_reverb has no {target_name!r}',
        name=fullname,
      ) from None
    return importlib.util.spec_from_loader(
      fullname, _AliasLoader(module), is_package=hasattr(module, '__path__')
    )


def _installed_finder() -> Optional[_ReverbAliasFinder]:
  for finder in sys.meta_path:
    if isinstance(finder, _ReverbAliasFinder):
      return finder
  return None


def _install_finder(check_dm_reverb: bool) -> None:
  finder = _installed_finder()
  if finder is not None:
    sys.meta_path.remove(finder)
  # First, so that no other finder loads a second copy of a module from
  # tf_reverb's path under a `reverb.` name.
  sys.meta_path.insert(0, _ReverbAliasFinder(check_dm_reverb))


def _drop_real_reverb_modules() -> None:
  for name in [n for n in sys.modules if _is_alias_name(n)]:
    module = sys.modules[name]
    if not getattr(module, '__name__', '').startswith(_TARGET):
      del sys.modules[name]


def install_as_reverb(
  *, replace_dm_reverb: bool = False, child_processes: bool = True
) -> None:
  """Makes ``import reverb`` (and ``reverb.<submodule>``) give tf_reverb.

  For code that cannot be edited (Acme, TF-Agents, rlds, Reverb programs).
  Idempotent. Modules resolve lazily: nothing more than tf_reverb itself is
  imported by this call, and TensorFlow only when a module needing it is.

  Args:
    replace_dm_reverb: use tf_reverb even though a real ``reverb`` (dm-reverb)
      is installed or imported; modules of it that were already imported
      stay valid where they are referenced but ``import reverb`` gives
      tf_reverb from now on.
    child_processes: also set ``TF_REVERB_AS_REVERB`` in ``os.environ`` so
      that child processes started from now on (multiprocessing spawn,
      subprocess) get the alias at start-up (through the ``.pth`` hook that
      tf_reverb installs).

  Raises:
    RuntimeError: when a real ``reverb`` is installed or already imported
      and `replace_dm_reverb` is False. Nothing is changed then.
  """
  imported = sys.modules.get(_ALIAS)
  if imported is not None and not getattr(imported, '__name__', '').startswith(
    _TARGET
  ):
    if not replace_dm_reverb:
      raise RuntimeError(
        'A real reverb (dm-reverb) is already imported from '
        f'{getattr(imported, "__file__", None) or imported!r}; '
        'install_as_reverb() refuses to shadow it. Call it before anything '
        'imports reverb, or pass replace_dm_reverb=True.'
      )
    _drop_real_reverb_modules()
  if not replace_dm_reverb and _installed_finder() is None:
    location = _other_reverb_location()
    if location is not None:
      raise RuntimeError(
        f'{_describe_other_reverb(location)}; install_as_reverb() refuses '
        'to shadow it. Uninstall dm-reverb, or pass replace_dm_reverb=True '
        'to use tf_reverb under the name reverb anyway.'
      )
  importlib.import_module(_TARGET)
  _install_finder(check_dm_reverb=False)
  if child_processes:
    os.environ[ENV_VAR] = 'replace' if replace_dm_reverb else '1'


def install_from_environment() -> None:
  """The start-up hook: installs the alias when ``TF_REVERB_AS_REVERB`` is set.

  Does nothing (and imports nothing) otherwise. Never raises: a conflict with
  an installed dm-reverb is reported when ``reverb`` is first imported.
  """
  value = os.environ.get(ENV_VAR, '').strip().lower()
  if value in ('', '0', 'false', 'no', 'off'):
    return
  if _installed_finder() is None:
    _install_finder(check_dm_reverb=value != 'replace')
