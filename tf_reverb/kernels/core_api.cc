#include "tf_reverb/kernels/core_api.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <string>

#include "absl/status/status.h"

namespace tf_reverb {
namespace {

std::atomic<const CoreApi*> bound_api{nullptr};

template <typename T>
bool Resolve(void* handle, const char* name, T* out) {
  *out = reinterpret_cast<T>(dlsym(handle, name));
  return *out != nullptr;
}

}  // namespace

tensorflow::StatusOr<const CoreApi*> CoreApi::Get() {
  const CoreApi* api = bound_api.load();
  if (api == nullptr) {
    return absl::FailedPreconditionError(
        "The tf_reverb core is not loaded; use the ops through tf_reverb.ops.");
  }
  return api;
}

tensorflow::Status CoreStatus(int code, const char* message) {
  if (code == 0) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(code), message);
}

}  // namespace tf_reverb

extern "C" int tf_reverb_kernels_bind_core(const char* core_path, char* error, size_t error_size) {
  auto fail = [&](const std::string& message) {
    std::strncpy(error, message.c_str(), error_size - 1);
    error[error_size - 1] = '\0';
    return 1;
  };
  if (tf_reverb::bound_api.load() != nullptr) return 0;
  void* handle = dlopen(core_path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (handle == nullptr) return fail(std::string("dlopen failed: ") + dlerror());
  auto* api = new tf_reverb::CoreApi();
  if (!tf_reverb::Resolve(handle, "tf_reverb_client_new", &api->client_new) ||
      !tf_reverb::Resolve(handle, "tf_reverb_client_free", &api->client_free) ||
      !tf_reverb::Resolve(handle, "tf_reverb_client_sample", &api->client_sample) ||
      !tf_reverb::Resolve(handle, "tf_reverb_client_insert", &api->client_insert) ||
      !tf_reverb::Resolve(handle, "tf_reverb_client_update_priorities",
                          &api->client_update_priorities) ||
      !tf_reverb::Resolve(handle, "tf_reverb_client_check_requested_specs",
                          &api->client_check_requested_specs) ||
      !tf_reverb::Resolve(handle, "tf_reverb_sampler_new", &api->sampler_new) ||
      !tf_reverb::Resolve(handle, "tf_reverb_sampler_next", &api->sampler_next) ||
      !tf_reverb::Resolve(handle, "tf_reverb_sampler_close", &api->sampler_close) ||
      !tf_reverb::Resolve(handle, "tf_reverb_sampler_free", &api->sampler_free) ||
      !tf_reverb::Resolve(handle, "tf_reverb_structured_writer_new", &api->structured_writer_new) ||
      !tf_reverb::Resolve(handle, "tf_reverb_structured_writer_append",
                          &api->structured_writer_append) ||
      !tf_reverb::Resolve(handle, "tf_reverb_structured_writer_flush",
                          &api->structured_writer_flush) ||
      !tf_reverb::Resolve(handle, "tf_reverb_structured_writer_end_episode",
                          &api->structured_writer_end_episode) ||
      !tf_reverb::Resolve(handle, "tf_reverb_structured_writer_free",
                          &api->structured_writer_free) ||
      !tf_reverb::Resolve(handle, "tf_reverb_pattern_engine_new", &api->pattern_engine_new) ||
      !tf_reverb::Resolve(handle, "tf_reverb_pattern_engine_append", &api->pattern_engine_append) ||
      !tf_reverb::Resolve(handle, "tf_reverb_pattern_engine_pop", &api->pattern_engine_pop) ||
      !tf_reverb::Resolve(handle, "tf_reverb_pattern_engine_free", &api->pattern_engine_free)) {
    delete api;
    return fail(std::string("The core at ") + core_path + " lacks the C ABI.");
  }
  const tf_reverb::CoreApi* expected = nullptr;
  if (!tf_reverb::bound_api.compare_exchange_strong(expected, api)) delete api;
  return 0;
}
