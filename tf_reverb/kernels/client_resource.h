// ReverbClientResource: the TF resource behind TFClient — one core client
// (and gRPC channel) per ReverbClient op instance, shared by every op that
// takes its handle.
//
// Contract: thread-safe (the core client is); owned by TF's ResourceMgr and
// freed with the core's tf_reverb_client_free.
#ifndef TF_REVERB_KERNELS_CLIENT_RESOURCE_H_
#define TF_REVERB_KERNELS_CLIENT_RESOURCE_H_

#include <string>

#include "server/c_api/c_api.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tf_reverb/kernels/core_api.h"

namespace tf_reverb {

class ReverbClientResource : public tensorflow::ResourceBase {
 public:
  ReverbClientResource(const CoreApi* api, const std::string& server_address)
      : api_(api),
        server_address_(server_address),
        client_(api->client_new(server_address.c_str())) {}
  ~ReverbClientResource() override { api_->client_free(client_); }

  std::string DebugString() const override { return "ReverbClient(" + server_address_ + ")"; }
  const CoreApi* api() const { return api_; }
  TfReverbClient* client() const { return client_; }

 private:
  const CoreApi* api_;
  const std::string server_address_;
  TfReverbClient* client_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_KERNELS_CLIENT_RESOURCE_H_
