"""Loads tf_reverb's generated _pb2 modules and round-trips wire messages.

Run by tests/test_proto_runtimes.py inside a venv that has one protobuf
runtime and nothing of tf_reverb: ``python proto_check.py PACKAGE_DIR``, where
PACKAGE_DIR is a copy of tf_reverb/proto/ (a package of any name), so the
gencode is imported without tf_reverb's native core. Prints one JSON line
(protobuf version, implementation, modules) and exits non-zero on failure.
"""

import glob
import importlib
import json
import os
import sys
from types import ModuleType
from typing import Dict


def load_package(package_dir: str) -> Dict[str, ModuleType]:
  """Imports every *_pb2.py of `package_dir` as a submodule of its package."""
  parent, package = os.path.split(os.path.abspath(package_dir))
  sys.path.insert(0, parent)
  modules = {}
  for path in sorted(glob.glob(os.path.join(package_dir, '*_pb2.py'))):
    name = os.path.basename(path)[:-3]
    modules[name] = importlib.import_module(f'{package}.{name}')
  assert 'tf_reverb' not in sys.modules, 'tf_reverb itself was imported'
  expected = {
    'checkpoint_pb2',
    'patterns_pb2',
    'reverb_service_pb2',
    'schema_pb2',
    'struct_pb2',
    'tensor_pb2',
  }
  assert expected <= set(modules), f'missing modules: {expected - set(modules)}'
  return modules


def check_insert_stream_request(m: Dict[str, ModuleType]) -> None:
  """InsertStreamRequest carrying a ChunkData (lazy Data, enums, Timestamp)."""
  service, schema, tensor = (
    m['reverb_service_pb2'],
    m['schema_pb2'],
    m['tensor_pb2'],
  )
  request = service.InsertStreamRequest()
  chunk = request.chunks.add(
    chunk_key=7,
    delta_encoded=True,
    data_tensors_len=1,
    data_uncompressed_size=24,
  )
  chunk.sequence_range.episode_id = 3
  chunk.sequence_range.start = 0
  chunk.sequence_range.end = 2
  chunk.compression = schema.ChunkData.COMPRESSION_ZSTD
  t = chunk.data.tensors.add(dtype=tensor.DT_FLOAT, tensor_content=b'\x00' * 12)
  t.tensor_shape.dim.add(size=3)
  item = request.items.add(key=11, table='my_table', priority=1.5)
  item.inserted_at.seconds = 1_700_000_000
  column = item.flat_trajectory.columns.add(squeeze=True)
  column.chunk_slices.add(chunk_key=7, offset=0, length=3, index=0)
  request.keep_chunk_keys.extend([7, 2**64 - 1])

  parsed = service.InsertStreamRequest.FromString(request.SerializeToString())
  assert parsed == request, (parsed, request)
  got = parsed.chunks[0]
  assert got.compression == schema.ChunkData.COMPRESSION_ZSTD
  assert got.data.tensors[0].tensor_shape.dim[0].size == 3
  assert parsed.items[0].inserted_at.seconds == 1_700_000_000
  assert parsed.keep_chunk_keys[1] == 2**64 - 1
  assert tensor.DataType.Name(got.data.tensors[0].dtype) == 'DT_FLOAT'


def check_structured_value(m: Dict[str, ModuleType]) -> None:
  """A signature nest: dict of list of TensorSpecProto, a map field."""
  struct, tensor = m['struct_pb2'], m['tensor_pb2']
  value = struct.StructuredValue()
  entry = value.dict_value.fields['observation']
  spec = entry.list_value.values.add().tensor_spec_value
  spec.name = 'observation'
  spec.dtype = tensor.DT_INT64
  spec.shape.dim.add(size=-1)
  value.dict_value.fields['done'].bool_value = True
  value.dict_value.fields['none'].none_value.SetInParent()

  parsed = struct.StructuredValue.FromString(value.SerializeToString())
  assert parsed == value
  assert parsed.WhichOneof('kind') == 'dict_value'
  assert sorted(parsed.dict_value.fields) == ['done', 'none', 'observation']
  got = parsed.dict_value.fields['observation'].list_value.values[0]
  assert got.tensor_spec_value.dtype == tensor.DT_INT64
  assert got.tensor_spec_value.shape.dim[0].size == -1
  options = struct.DictValue.DESCRIPTOR.fields_by_name['fields'].message_type
  assert options.GetOptions().map_entry


def check_server_config(m: Dict[str, ModuleType]) -> None:
  """ReverbServerConfig in text format (the reverb_server --config file)."""
  from google.protobuf import json_format  # pylint: disable=g-import-not-at-top
  from google.protobuf import text_format  # pylint: disable=g-import-not-at-top

  checkpoint = m['checkpoint_pb2']
  config = text_format.Parse(
    """
      port: 8000
      tables {
        table_name: "my_table"
        max_size: 1000
        max_times_sampled: 1
        sampler { prioritized { priority_exponent: 0.8 } }
        remover { fifo: true }
        rate_limiter {
          samples_per_insert: 1.0 min_diff: -1e9 max_diff: 1e9
          min_size_to_sample: 1
        }
      }
      """,
    checkpoint.ReverbServerConfig(),
  )
  assert config.port == 8000
  table = config.tables[0]
  assert table.sampler.prioritized.priority_exponent == 0.8
  assert table.remover.fifo and table.rate_limiter.min_size_to_sample == 1
  again = text_format.Parse(
    text_format.MessageToString(config), checkpoint.ReverbServerConfig()
  )
  assert again == config
  from_json = json_format.Parse(
    json_format.MessageToJson(config), checkpoint.ReverbServerConfig()
  )
  assert from_json == config


def main() -> None:
  modules = load_package(sys.argv[1])
  check_insert_stream_request(modules)
  check_structured_value(modules)
  check_server_config(modules)
  import google.protobuf  # pylint: disable=g-import-not-at-top
  from google.protobuf.internal import api_implementation  # pylint: disable=g-import-not-at-top

  print(
    json.dumps(
      {
        'protobuf': google.protobuf.__version__,
        'implementation': api_implementation.Type(),
        'modules': sorted(modules),
      }
    )
  )


if __name__ == '__main__':
  main()
