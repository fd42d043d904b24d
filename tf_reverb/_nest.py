"""Nest helpers on the per-step and per-batch paths.

``tree.unflatten_as`` walks the structure in Python on every call; the
structures of steps and batches are most often a flat dict, list or tuple,
which these helpers rebuild directly, with ``tree``'s semantics (a dict's
leaves in sorted-key order, the result in the structure's own key order).
"""

from typing import Any, List

import tree

__all__ = ['unflatten_as']


def _leaves(values: Any) -> bool:
  """Whether every one of `values` is a leaf other than None."""
  return not any(v is None or tree.is_nested(v) for v in values)


def unflatten_as(structure: Any, flat: List[Any]) -> Any:
  """``tree.unflatten_as``, with fast paths for flat dicts, lists and
  tuples; other structures, and a `flat` of another length (``ValueError``),
  go to ``tree``."""
  kind = type(structure)
  if kind in (dict, list, tuple) and len(flat) == len(structure):
    if kind is dict and _leaves(structure.values()):
      by_key = dict(zip(sorted(structure), flat))
      return {key: by_key[key] for key in structure}
    if kind is not dict and _leaves(structure):
      return kind(flat)
  return tree.unflatten_as(structure, flat)
