// CoreApi: the core's C ABI (server/c_api/c_api.h) as resolved at run time.
//
// The kernel library links TensorFlow only. Python calls
// tf_reverb_kernels_bind_core(path) once, with the path of the already
// imported tf_reverb.pybind extension; dlopen of that path returns the same
// handle, so kernels and Python share one core (and in-process tables).
//
// Contract: Get() is thread-safe; it returns FAILED_PRECONDITION until the
// core was bound.
#ifndef TF_REVERB_KERNELS_CORE_API_H_
#define TF_REVERB_KERNELS_CORE_API_H_

#include <cstddef>

#include "server/c_api/c_api.h"
#include "tensorflow/core/platform/status.h"
#include "tensorflow/core/platform/statusor.h"

namespace tf_reverb {

struct CoreApi {
  decltype(&tf_reverb_client_new) client_new;
  decltype(&tf_reverb_client_free) client_free;
  decltype(&tf_reverb_client_sample) client_sample;
  decltype(&tf_reverb_client_insert) client_insert;
  decltype(&tf_reverb_client_update_priorities) client_update_priorities;
  decltype(&tf_reverb_client_check_requested_specs) client_check_requested_specs;
  decltype(&tf_reverb_sampler_new) sampler_new;
  decltype(&tf_reverb_sampler_next) sampler_next;
  decltype(&tf_reverb_sampler_close) sampler_close;
  decltype(&tf_reverb_sampler_free) sampler_free;
  decltype(&tf_reverb_structured_writer_new) structured_writer_new;
  decltype(&tf_reverb_structured_writer_append) structured_writer_append;
  decltype(&tf_reverb_structured_writer_flush) structured_writer_flush;
  decltype(&tf_reverb_structured_writer_end_episode) structured_writer_end_episode;
  decltype(&tf_reverb_structured_writer_free) structured_writer_free;
  decltype(&tf_reverb_pattern_engine_new) pattern_engine_new;
  decltype(&tf_reverb_pattern_engine_append) pattern_engine_append;
  decltype(&tf_reverb_pattern_engine_pop) pattern_engine_pop;
  decltype(&tf_reverb_pattern_engine_free) pattern_engine_free;

  static tensorflow::StatusOr<const CoreApi*> Get();
};

// Size of the error buffers kernels hand to the C ABI calls.
inline constexpr size_t kErrorSize = 2048;

// Turns a core status code + message into a TF status.
tensorflow::Status CoreStatus(int code, const char* message);

}  // namespace tf_reverb

extern "C" int tf_reverb_kernels_bind_core(const char* core_path, char* error, size_t error_size);

#endif  // TF_REVERB_KERNELS_CORE_API_H_
