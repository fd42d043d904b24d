// The tables the fuzz targets (and their seed generator) insert into and
// restore checkpoints into: a uniform sampler, a FIFO remover and a rate
// limiter that never blocks an insert (min_size_to_sample 1, unbounded diffs),
// so the targets never wait.
//
// Contract: header-only; each call builds a fresh, independent table.
#ifndef TF_REVERB_SERVER_FUZZ_FUZZ_TABLES_H_
#define TF_REVERB_SERVER_FUZZ_FUZZ_TABLES_H_

#include <cfloat>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "schema.pb.h"
#include "server/rate_limiter.h"
#include "server/selectors/selector.h"
#include "server/table.h"
#include "struct.pb.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace fuzz {

inline absl::StatusOr<std::shared_ptr<Table>> MakeFuzzTable(std::string name,
                                                            int64_t max_size = 1000,
                                                            std::string signature = "") {
  deepmind::reverb::KeyDistributionOptions uniform;
  uniform.set_uniform(true);
  deepmind::reverb::KeyDistributionOptions fifo;
  fifo.set_fifo(true);
  absl::StatusOr<RateLimiter> limiter = RateLimiter::Create(1.0, 1, -DBL_MAX, DBL_MAX);
  if (!limiter.ok()) return limiter.status();
  absl::StatusOr<std::unique_ptr<ItemSelector>> sampler = CreateSelector(uniform);
  if (!sampler.ok()) return sampler.status();
  absl::StatusOr<std::unique_ptr<ItemSelector>> remover = CreateSelector(fifo);
  if (!remover.ok()) return remover.status();
  return Table::Create(Table::Config{std::move(name), *std::move(sampler), *std::move(remover),
                                     max_size, /*max_times_sampled=*/0, *limiter,
                                     std::move(signature)});
}

// The tables of the insert-stream target, by name, with their serialized
// signatures: "t" and "u" have none, "typed" has (int32[?], string[]).
inline std::vector<std::pair<std::string, std::string>> FuzzTableSignatures() {
  ::tf_reverb::tf::StructuredValue signature;
  auto* tuple = signature.mutable_tuple_value();
  auto* ints = tuple->add_values()->mutable_tensor_spec_value();
  ints->set_dtype(::tf_reverb::tf::DT_INT32);
  ints->mutable_shape()->add_dim()->set_size(-1);
  auto* strings = tuple->add_values()->mutable_tensor_spec_value();
  strings->set_dtype(::tf_reverb::tf::DT_STRING);
  strings->mutable_shape();
  return {{"t", ""}, {"u", ""}, {"typed", signature.SerializeAsString()}};
}

}  // namespace fuzz
}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_FUZZ_FUZZ_TABLES_H_
