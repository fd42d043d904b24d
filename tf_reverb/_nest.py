"""Nest helpers on the per-step and per-batch paths.

``tree.unflatten_as`` walks the structure in Python on every call; the
structures of steps and batches are most often a flat dict, list or tuple,
which these helpers rebuild directly, with ``tree``'s semantics (a dict's
leaves in sorted-key order, the result in the structure's own key order).
"""

from typing import Any, List

import tree

__all__ = ['unflatten_as']

_NESTS = (dict, list, tuple)


def unflatten_as(structure: Any, flat: List[Any]) -> Any:
  """``tree.unflatten_as``, with fast paths for flat dicts, lists and
  tuples."""
  if type(structure) is dict and not any(  # pylint: disable=unidiomatic-typecheck
    isinstance(v, _NESTS) or v is None for v in structure.values()
  ):
    by_key = dict(zip(sorted(structure), flat))
    return {key: by_key[key] for key in structure}
  if type(structure) in (list, tuple) and not any(
    isinstance(v, _NESTS) or v is None for v in structure
  ):
    return type(structure)(flat)
  return tree.unflatten_as(structure, flat)
