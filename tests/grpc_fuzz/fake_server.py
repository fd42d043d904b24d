"""A fake ReverbService, for checking how tf_reverb maps statuses to exceptions.

``FakeReverbServer`` ends one chosen method with a chosen status and serves
the others just enough for tf_reverb's clients and writers.
"""

from typing import Any, Callable, Dict, Iterator

import grpc

from tf_reverb.proto import reverb_service_pb2 as rs

from .fuzz_server import REQUEST_TYPES, STREAM_METHODS, UNARY_METHODS


class FakeReverbServer:
  """A Python ReverbService whose `failing` method ends with a chosen status.

  The other methods behave just enough for tf_reverb's clients: ServerInfo
  reports one table 'my_table' (no signature), InsertStream confirms every
  item, the unary admin calls succeed, SampleStream and InitializeConnection
  end at once (OK). Set `failing`, `code` and `message` before a call.
  """

  def __init__(self):
    """Starts the gRPC server on a free localhost port."""
    from concurrent import futures  # pylint: disable=g-import-not-at-top

    self.failing = ''
    self.code = grpc.StatusCode.OK
    self.message = ''
    self.calls: Dict[str, int] = {}
    self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    handlers = {}
    for method in UNARY_METHODS:
      handlers[method] = grpc.unary_unary_rpc_method_handler(
        self._unary(method),
        request_deserializer=REQUEST_TYPES[method].FromString,
        response_serializer=lambda m: m.SerializeToString(),
      )
    for method in STREAM_METHODS:
      handlers[method] = grpc.stream_stream_rpc_method_handler(
        self._stream(method),
        request_deserializer=REQUEST_TYPES[method].FromString,
        response_serializer=lambda m: m.SerializeToString(),
      )
    self._server.add_generic_rpc_handlers(
      [
        grpc.method_handlers_generic_handler(
          'deepmind.reverb.ReverbService', handlers
        )
      ]
    )
    self.port = self._server.add_insecure_port('127.0.0.1:0')
    self._server.start()

  @property
  def address(self) -> str:
    """host:port."""
    return f'127.0.0.1:{self.port}'

  def stop(self) -> None:
    """Stops the server."""
    self._server.stop(grace=None)

  def _count(self, method: str, context: grpc.ServicerContext) -> None:
    self.calls[method] = self.calls.get(method, 0) + 1
    if method == self.failing:
      context.abort(self.code, self.message)

  def _unary(self, method: str) -> Callable[[Any, grpc.ServicerContext], Any]:
    responses = {
      'MutatePriorities': rs.MutatePrioritiesResponse,
      'Reset': rs.ResetResponse,
      'Checkpoint': lambda: rs.CheckpointResponse(checkpoint_path='/fake'),
    }

    def handle(request: Any, context: grpc.ServicerContext) -> Any:
      del request
      self._count(method, context)
      if method == 'ServerInfo':
        response = rs.ServerInfoResponse()
        info = response.table_info.add(name='my_table', max_size=10)
        info.sampler_options.uniform = True
        info.remover_options.fifo = True
        return response
      return responses[method]()

    return handle

  def _stream(
    self, method: str
  ) -> Callable[[Iterator[Any], grpc.ServicerContext], Iterator[Any]]:
    def handle(
      requests: Iterator[Any], context: grpc.ServicerContext
    ) -> Iterator[Any]:
      if method == 'InsertStream':
        for request in requests:
          self._count(method, context)
          if request.items:
            yield rs.InsertStreamResponse(keys=[i.key for i in request.items])
        return
      for _ in requests:
        self._count(method, context)
        return

    return handle
