"""Python construction of tables, selectors and rate limiters."""

import pytest

import tf_reverb as reverb


def test_selector_reprs_match_reverb():
  assert repr(reverb.selectors.Uniform()) == 'UniformSelector'
  assert repr(reverb.selectors.Fifo()) == 'FifoSelector'
  assert repr(reverb.selectors.Lifo()) == 'LifoSelector'
  assert repr(reverb.selectors.MinHeap()) == 'HeapSelector(sign=1)'
  assert repr(reverb.selectors.MaxHeap()) == 'HeapSelector(sign=-1)'
  assert (repr(reverb.selectors.Prioritized(0.8)) ==
          'PrioritizedSelector(priority_exponent=0.8)')


def test_rate_limiter_repr_and_presets():
  assert repr(reverb.rate_limiters.MinSize(1)) == (
      'RateLimiter(samples_per_insert=1, min_diff_=-1.79769e+308, '
      'max_diff=1.79769e+308, min_size_to_sample=1)')
  limiter = reverb.rate_limiters.SampleToInsertRatio(2.0, 2, 3.0)
  assert (limiter.min_diff, limiter.max_diff) == (1.0, 7.0)
  queue = reverb.rate_limiters.Queue(5)
  assert (queue.samples_per_insert, queue.min_size_to_sample, queue.min_diff,
          queue.max_diff) == (1.0, 1, 0.0, 5.0)


@pytest.mark.parametrize('args', [(0, 1, 0.0, 1.0), (1.0, 0, 0.0, 1.0)])
def test_invalid_generic_rate_limiter_is_a_value_error(args):
  with pytest.raises(ValueError):
    reverb.rate_limiters.RateLimiter(*args)


def test_sample_to_insert_ratio_validation():
  with pytest.raises(ValueError):
    reverb.rate_limiters.SampleToInsertRatio(0.0, 1, 2.0)
  with pytest.raises(ValueError, match='error_buffer'):
    reverb.rate_limiters.SampleToInsertRatio(1.0, 1, 0.5)
  with pytest.raises(ValueError):
    reverb.rate_limiters.MinSize(0)


def test_table_validation():
  with pytest.raises(ValueError, match='name must be nonempty'):
    reverb.Table('', reverb.selectors.Uniform(), reverb.selectors.Fifo(), 10,
                 reverb.rate_limiters.MinSize(1))
  with pytest.raises(ValueError, match='max_size'):
    reverb.Table('t', reverb.selectors.Uniform(), reverb.selectors.Fifo(), 0,
                 reverb.rate_limiters.MinSize(1))


def test_reused_selector_or_limiter_is_a_value_error_not_a_crash():
  selector = reverb.selectors.Uniform()
  with pytest.raises(ValueError):
    reverb.Table('t', selector, selector, 10, reverb.rate_limiters.MinSize(1))
  limiter = reverb.rate_limiters.MinSize(1)
  reverb.Table('a', reverb.selectors.Uniform(), reverb.selectors.Fifo(), 10,
               limiter)
  with pytest.raises(ValueError, match='already used by table'):
    reverb.Table('b', reverb.selectors.Uniform(), reverb.selectors.Fifo(), 10,
                 limiter)


def test_table_info_and_limiter_checks():
  table = reverb.Table.queue('q', 2)
  assert table.name == 'q'
  assert table.info.max_times_sampled == 1
  assert table.info.sampler_options.fifo
  assert table.can_insert(1)
  assert not table.can_sample(1)
  with pytest.raises(ValueError):
    table.can_sample(0)
  assert 'FifoSelector' in repr(table)
