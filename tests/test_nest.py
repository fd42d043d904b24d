"""tf_reverb._nest: the fast unflattening of steps and batches agrees with
``tree``."""

import collections
import types

import pytest
import tree

from tf_reverb import _nest

Pair = collections.namedtuple('Pair', 'x y')


@pytest.mark.parametrize(
  'structure, flat',
  [
    ({'b': 0, 'a': 0}, [1, 2]),  # leaves in sorted-key order
    ([0, 0, 0], [1, 2, 3]),
    ((0, 0), [1, 2]),
    (Pair(0, 0), [1, 2]),
    ({'a': [0, 0], 'b': 0}, [1, 2, 3]),
    ({'m': types.MappingProxyType({'x': 0, 'y': 0})}, [1, 2]),
    ({'a': None, 'b': 0}, [1, 2]),
    (collections.OrderedDict([('b', 0), ('a', 0)]), [1, 2]),
  ],
)
def test_agrees_with_tree(structure, flat):
  got = _nest.unflatten_as(structure, flat)
  want = tree.unflatten_as(structure, flat)
  assert got == want
  assert type(got) is type(want)
  if isinstance(want, dict):
    assert list(got) == list(want)  # the structure's own key order


@pytest.mark.parametrize(
  'structure, flat',
  [([0, 0], [1, 2, 3]), ({'a': 0}, [1, 2]), ({'a': 0, 'b': 0}, [1])],
)
def test_a_flat_list_of_another_length_is_a_value_error(structure, flat):
  with pytest.raises(ValueError):
    _nest.unflatten_as(structure, flat)
