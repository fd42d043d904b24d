"""Python construction of tables, selectors and rate limiters."""

import pytest

import tf_reverb as reverb


def test_selector_reprs_match_reverb():
  assert repr(reverb.selectors.Uniform()) == 'UniformSelector'
  assert repr(reverb.selectors.Fifo()) == 'FifoSelector'
  assert repr(reverb.selectors.Lifo()) == 'LifoSelector'
  assert repr(reverb.selectors.MinHeap()) == 'HeapSelector(sign=1)'
  assert repr(reverb.selectors.MaxHeap()) == 'HeapSelector(sign=-1)'
  assert (
    repr(reverb.selectors.Prioritized(0.8))
    == 'PrioritizedSelector(priority_exponent=0.8)'
  )


def test_rate_limiter_repr_and_presets():
  assert repr(reverb.rate_limiters.MinSize(1)) == (
    'RateLimiter(samples_per_insert=1, min_diff_=-1.79769e+308, '
    'max_diff=1.79769e+308, min_size_to_sample=1)'
  )
  limiter = reverb.rate_limiters.SampleToInsertRatio(2.0, 2, 3.0)
  assert (limiter.min_diff, limiter.max_diff) == (1.0, 7.0)
  queue = reverb.rate_limiters.Queue(5)
  assert (
    queue.samples_per_insert,
    queue.min_size_to_sample,
    queue.min_diff,
    queue.max_diff,
  ) == (1.0, 1, 0.0, 5.0)


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
    reverb.Table(
      '',
      reverb.selectors.Uniform(),
      reverb.selectors.Fifo(),
      10,
      reverb.rate_limiters.MinSize(1),
    )
  with pytest.raises(ValueError, match='max_size'):
    reverb.Table(
      't',
      reverb.selectors.Uniform(),
      reverb.selectors.Fifo(),
      0,
      reverb.rate_limiters.MinSize(1),
    )


def test_reused_selector_or_limiter_is_a_value_error_not_a_crash():
  selector = reverb.selectors.Uniform()
  with pytest.raises(ValueError):
    reverb.Table('t', selector, selector, 10, reverb.rate_limiters.MinSize(1))
  limiter = reverb.rate_limiters.MinSize(1)
  reverb.Table(
    'a', reverb.selectors.Uniform(), reverb.selectors.Fifo(), 10, limiter
  )
  with pytest.raises(ValueError, match='already used by table'):
    reverb.Table(
      'b', reverb.selectors.Uniform(), reverb.selectors.Fifo(), 10, limiter
    )


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


def test_selectors_limiters_and_extensions_have_reverbs_pybind_classes():
  pybind = reverb.pybind
  cases = [
    (reverb.selectors.Uniform(), pybind.UniformSelector),
    (reverb.selectors.Prioritized(0.8), pybind.PrioritizedSelector),
    (reverb.selectors.Fifo(), pybind.FifoSelector),
    (reverb.selectors.Lifo(), pybind.LifoSelector),
    (reverb.selectors.MinHeap(), pybind.HeapSelector),
    (reverb.selectors.MaxHeap(), pybind.HeapSelector),
  ]
  for selector, cls in cases:
    assert isinstance(selector, cls), (selector, cls)
    assert isinstance(selector, pybind.ItemSelector)
    assert isinstance(selector, reverb.selectors.ItemSelector)
  for limiter in (
    reverb.rate_limiters.MinSize(1),
    reverb.rate_limiters.Queue(3),
    reverb.rate_limiters.Stack(3),
    reverb.rate_limiters.SampleToInsertRatio(2.0, 10, 5.0),
    reverb.rate_limiters.RateLimiter(1.0, 1, -1.0, 1.0),
  ):
    assert isinstance(limiter, pybind.RateLimiter)
  assert issubclass(pybind.HeapSelector, pybind.ItemSelector)
  assert isinstance(pybind.TableExtension, type)
  assert reverb.server.TableExtensionBase.__abstractmethods__ == frozenset(
    {'build_internal_extensions'}
  )


def test_tables_accept_pybind_selectors_and_reject_other_objects():
  pybind = reverb.pybind
  table = reverb.Table(
    't',
    pybind.PrioritizedSelector(1.0),
    pybind.HeapSelector(True),
    10,
    reverb.rate_limiters.MinSize(1),
  )
  assert table.info.sampler_options.prioritized.priority_exponent == 1.0
  assert table.info.remover_options.heap.min_heap
  with pytest.raises(TypeError, match='sampler must be a selector'):
    reverb.Table(
      't',
      'uniform',
      reverb.selectors.Fifo(),
      10,
      reverb.rate_limiters.MinSize(1),
    )
  with pytest.raises(TypeError, match='rate_limiter must be'):
    reverb.Table(
      't', reverb.selectors.Uniform(), reverb.selectors.Fifo(), 10, object()
    )
  with pytest.raises(ValueError):
    pybind.PrioritizedSelector(-1.0)


def test_server_from_proto_builds_the_tables_of_a_server_config():
  # pylint: disable=g-import-not-at-top
  from google.protobuf import text_format
  from tf_reverb.proto import checkpoint_pb2
  from tf_reverb.proto import schema_pb2
  from tf_reverb.server_executable import server_from_proto

  # pylint: enable=g-import-not-at-top
  config = text_format.Parse(
    '''
      tables { table_name: "a" sampler { prioritized { priority_exponent: 0.5 } }
               remover { heap { min_heap: true } } max_size: 7
               max_times_sampled: 3
               rate_limiter { samples_per_insert: 2 min_size_to_sample: 4
                              min_diff: -8 max_diff: 16 } }
      tables { table_name: "b" sampler { uniform: true } remover { lifo: true }
               max_size: 9
               rate_limiter { samples_per_insert: 1 min_size_to_sample: 1
                              min_diff: -1 max_diff: 1 } }
      ''',
    checkpoint_pb2.ReverbServerConfig(),
  )
  tables = server_from_proto.tables_from_proto(config.tables)
  assert [t.name for t in tables] == ['a', 'b']
  info = tables[0].info
  assert info.sampler_options.prioritized.priority_exponent == 0.5
  assert info.remover_options.heap.min_heap
  assert (info.max_size, info.max_times_sampled) == (7, 3)
  assert (
    info.rate_limiter_info.samples_per_insert,
    info.rate_limiter_info.min_size_to_sample,
    info.rate_limiter_info.min_diff,
    info.rate_limiter_info.max_diff,
  ) == (2, 4, -8, 16)
  assert tables[1].info.remover_options.lifo
  with reverb.Server(tables) as server:
    client = reverb.Client(f'localhost:{server.port}')
    client.insert([1], {'a': 1.0, 'b': 1.0})
    assert client.server_info()['b'].current_size == 1

  limiter = server_from_proto.rate_limiter_from_proto(
    config.tables[0].rate_limiter
  )
  assert isinstance(limiter, reverb.rate_limiters.RateLimiter)
  assert limiter.samples_per_insert == 2 and limiter.max_diff == 16
  assert isinstance(
    server_from_proto.selector_from_proto(
      schema_pb2.KeyDistributionOptions(fifo=True)
    ),
    reverb.selectors.Fifo,
  )
  assert isinstance(
    server_from_proto.selector_from_proto(
      schema_pb2.KeyDistributionOptions(
        heap=schema_pb2.KeyDistributionOptions.Heap(min_heap=False)
      )
    ),
    reverb.pybind.HeapSelector,
  )
  for false_option in ('fifo', 'lifo', 'uniform'):
    with pytest.raises(ValueError):
      server_from_proto.selector_from_proto(
        schema_pb2.KeyDistributionOptions(**{false_option: False})
      )
  with pytest.raises(NotImplementedError):
    server_from_proto.selector_from_proto(schema_pb2.KeyDistributionOptions())
