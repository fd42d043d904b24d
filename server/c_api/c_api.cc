#include "server/c_api/c_api.h"

#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "patterns.pb.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/client/client.h"
#include "server/client/sample.h"
#include "server/client/sampler.h"
#include "server/patterns/local_pattern_runner.h"
#include "server/patterns/structured_writer.h"
#include "server/signature.h"
#include "server/tensor.h"
#include "server/trajectory_columns.h"
#include "tensor.pb.h"

struct TfReverbClient {
  std::unique_ptr<tf_reverb::Client> client;
};

struct TfReverbSampler {
  std::unique_ptr<tf_reverb::Sampler> sampler;
};

struct TfReverbStructuredWriter {
  std::unique_ptr<tf_reverb::StructuredWriter> writer;
};

struct TfReverbPatternEngine {
  std::unique_ptr<tf_reverb::LocalPatternRunner> runner;
};

namespace {

int Report(const absl::Status& status, char* error, size_t error_size) {
  if (!status.ok() && error != nullptr && error_size > 0) {
    std::string message(status.message());
    std::strncpy(error, message.c_str(), error_size - 1);
    error[error_size - 1] = '\0';
  }
  return static_cast<int>(status.code());
}

absl::StatusOr<tf_reverb::Tensor> FromView(const TfReverbTensorView& view) {
  tf_reverb::Tensor tensor;
  tensor.dtype = static_cast<tf_reverb::DataType>(view.dtype);
  tensor.shape.assign(view.dims, view.dims + view.rank);
  if (tensor.dtype == tf_reverb::tf::DT_STRING) {
    const auto* strings = static_cast<const TfReverbString*>(view.data);
    for (int64_t i = 0; i < tensor.num_elements(); ++i) {
      tensor.strings.emplace_back(strings[i].data, strings[i].size);
    }
  } else {
    tensor.data.assign(static_cast<const char*>(view.data), view.num_bytes);
  }
  if (absl::Status s = tf_reverb::ValidateTensor(tensor); !s.ok()) return s;
  return tensor;
}

TfReverbSampleInfo InfoOf(const tf_reverb::SampleMeta& meta) {
  return TfReverbSampleInfo{meta.key, meta.probability, meta.table_size, meta.priority,
                            meta.times_sampled};
}

// Hands `sample` to the caller's buffers: info, then each column through
// `allocate`, decoding numeric columns straight into the returned buffer.
absl::Status WriteSample(const tf_reverb::Sample& sample, TfReverbSampleInfo* info,
                         int32_t* num_columns, TfReverbAllocateFn allocate,
                         TfReverbSetStringFn set_string, void* context) {
  *info = InfoOf(sample.meta());
  absl::StatusOr<std::vector<tf_reverb::ColumnSpec>> specs = sample.ColumnSpecs();
  if (!specs.ok()) return specs.status();
  if (num_columns != nullptr) *num_columns = static_cast<int32_t>(specs->size());
  for (int c = 0; c < static_cast<int>(specs->size()); ++c) {
    const tf_reverb::ColumnSpec& spec = (*specs)[c];
    void* buffer = allocate(context, c, spec.dtype, static_cast<int32_t>(spec.shape.size()),
                            spec.shape.data());
    int64_t elements = 1;
    for (int64_t dim : spec.shape) elements *= dim;
    if (buffer == nullptr && elements > 0) {
      return absl::AbortedError(absl::StrCat("Could not allocate output ", c));
    }
    if (elements == 0) continue;
    if (spec.dtype == tf_reverb::tf::DT_STRING) {
      absl::StatusOr<tf_reverb::Tensor> tensor = sample.UnpackColumn(c);
      if (!tensor.ok()) return tensor.status();
      for (size_t i = 0; i < tensor->strings.size(); ++i) {
        set_string(context, c, static_cast<int64_t>(i), tensor->strings[i].data(),
                   tensor->strings[i].size());
      }
      continue;
    }
    if (absl::Status s = sample.UnpackColumnInto(c, static_cast<char*>(buffer)); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<deepmind::reverb::StructuredWriterConfig>> ParseConfigs(
    const char* const* configs, const size_t* config_sizes, int32_t num_configs) {
  std::vector<deepmind::reverb::StructuredWriterConfig> parsed(num_configs);
  for (int32_t i = 0; i < num_configs; ++i) {
    if (!parsed[i].ParseFromArray(configs[i], static_cast<int>(config_sizes[i]))) {
      return absl::InvalidArgumentError(
          absl::StrCat("Config at position ", i, " is not a serialized StructuredWriterConfig."));
    }
  }
  return parsed;
}

// Parses `configs` and wraps `create(parsed configs)` in a new Handle; NULL
// with `error` filled when either fails.
template <typename Handle, typename Create>
Handle* NewFromConfigs(const char* const* configs, const size_t* config_sizes, int32_t num_configs,
                       Create create, char* error, size_t error_size) {
  auto parsed = ParseConfigs(configs, config_sizes, num_configs);
  if (!parsed.ok()) {
    Report(parsed.status(), error, error_size);
    return nullptr;
  }
  auto created = create(*std::move(parsed));
  if (!created.ok()) {
    Report(created.status(), error, error_size);
    return nullptr;
  }
  return new Handle{*std::move(created)};
}

absl::StatusOr<std::vector<tf_reverb::Tensor>> FromViews(const TfReverbTensorView* columns,
                                                         int32_t num_columns) {
  std::vector<tf_reverb::Tensor> step;
  step.reserve(num_columns);
  for (int32_t c = 0; c < num_columns; ++c) {
    absl::StatusOr<tf_reverb::Tensor> tensor = FromView(columns[c]);
    if (!tensor.ok()) return tensor.status();
    step.push_back(*std::move(tensor));
  }
  return step;
}

absl::Duration TimeoutFromMs(int64_t timeout_ms) {
  return timeout_ms < 0 ? absl::InfiniteDuration() : absl::Milliseconds(timeout_ms);
}

// Hands `columns` to the caller's buffers through `allocate` / `set_string`.
absl::Status WriteTensors(const std::vector<tf_reverb::Tensor>& columns,
                          TfReverbAllocateFn allocate, TfReverbSetStringFn set_string,
                          void* context) {
  for (int c = 0; c < static_cast<int>(columns.size()); ++c) {
    const tf_reverb::Tensor& tensor = columns[c];
    void* buffer = allocate(context, c, tensor.dtype, static_cast<int32_t>(tensor.shape.size()),
                            tensor.shape.data());
    const int64_t elements = tensor.num_elements();
    if (buffer == nullptr && elements > 0) {
      return absl::AbortedError(absl::StrCat("Could not allocate output ", c));
    }
    if (tensor.dtype == tf_reverb::tf::DT_STRING) {
      for (int64_t i = 0; i < elements; ++i) {
        set_string(context, c, i, tensor.strings[i].data(), tensor.strings[i].size());
      }
    } else if (elements > 0) {
      std::memcpy(buffer, tensor.data.data(), tensor.data.size());
    }
  }
  return absl::OkStatus();
}

// Row 0 of every unsqueezed column of `sample`; a squeezed column (already
// a single timestep) as it is.
absl::StatusOr<std::vector<tf_reverb::Tensor>> FirstTimestep(const tf_reverb::Sample& sample) {
  std::vector<tf_reverb::Tensor> timestep;
  timestep.reserve(sample.num_columns());
  for (int c = 0; c < sample.num_columns(); ++c) {
    absl::StatusOr<tf_reverb::Tensor> column = sample.UnpackColumn(c);
    if (!column.ok()) return column.status();
    if (sample.squeezed(c)) {
      timestep.push_back(*std::move(column));
      continue;
    }
    if (column->shape.empty() || column->shape[0] < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("Column ", c, " of the sampled item has no timesteps."));
    }
    const int64_t rows = column->shape[0];
    tf_reverb::Tensor row;
    row.dtype = column->dtype;
    row.shape.assign(column->shape.begin() + 1, column->shape.end());
    if (row.dtype == tf_reverb::tf::DT_STRING) {
      const size_t per_row = column->strings.size() / rows;
      row.strings.assign(std::make_move_iterator(column->strings.begin()),
                         std::make_move_iterator(column->strings.begin() + per_row));
    } else {
      row.data = column->data.substr(0, column->data.size() / rows);
    }
    timestep.push_back(std::move(row));
  }
  return timestep;
}

}  // namespace

extern "C" {

TfReverbClient* tf_reverb_client_new(const char* server_address) {
  return new TfReverbClient{std::make_unique<tf_reverb::Client>(server_address)};
}

void tf_reverb_client_free(TfReverbClient* client) { delete client; }

int tf_reverb_client_sample(TfReverbClient* client, const char* table, int64_t timeout_ms,
                            TfReverbSampleInfo* info, TfReverbAllocateFn allocate,
                            TfReverbSetStringFn set_string, void* context, char* error,
                            size_t error_size) {
  tf_reverb::SamplerOptions options;
  options.max_samples = 1;
  if (timeout_ms >= 0) options.rate_limiter_timeout = absl::Milliseconds(timeout_ms);
  std::unique_ptr<tf_reverb::Sampler> sampler = client->client->NewSampler(table, options);
  absl::StatusOr<tf_reverb::Sample> sample = sampler->Next();
  if (!sample.ok()) return Report(sample.status(), error, error_size);
  *info = InfoOf(sample->meta());
  absl::StatusOr<std::vector<tf_reverb::Tensor>> timestep = FirstTimestep(*sample);
  if (!timestep.ok()) return Report(timestep.status(), error, error_size);
  return Report(WriteTensors(*timestep, allocate, set_string, context), error, error_size);
}

int tf_reverb_client_insert(TfReverbClient* client, const TfReverbTensorView* columns,
                            int32_t num_columns, const char* const* tables,
                            const double* priorities, int32_t num_tables, int64_t policy_version,
                            char* error, size_t error_size) {
  absl::StatusOr<std::vector<tf_reverb::Tensor>> step = FromViews(columns, num_columns);
  if (!step.ok()) return Report(step.status(), error, error_size);
  std::vector<std::pair<std::string, double>> targets;
  for (int32_t t = 0; t < num_tables; ++t) targets.emplace_back(tables[t], priorities[t]);
  return Report(client->client->InsertStep(
                    *step, targets,
                    policy_version < 0 ? std::nullopt : std::optional<int64_t>(policy_version)),
                error, error_size);
}

int tf_reverb_client_update_priorities(TfReverbClient* client, const char* table,
                                       const uint64_t* keys, const double* priorities,
                                       int64_t num_keys, char* error, size_t error_size) {
  std::vector<deepmind::reverb::KeyWithPriority> updates(num_keys);
  for (int64_t i = 0; i < num_keys; ++i) {
    updates[i].set_key(keys[i]);
    updates[i].set_priority(priorities[i]);
  }
  return Report(client->client->MutatePriorities(table, updates, {}), error, error_size);
}

int tf_reverb_client_check_requested_specs(TfReverbClient* client, const char* table,
                                           int64_t timeout_ms, const TfReverbSpec* specs,
                                           int32_t num_specs, char* error, size_t error_size) {
  absl::StatusOr<deepmind::reverb::ServerInfoResponse> info = client->client->ServerInfo(
      timeout_ms < 0 ? absl::InfiniteDuration() : absl::Milliseconds(timeout_ms));
  if (!info.ok()) return Report(info.status(), error, error_size);
  for (const auto& table_info : info->table_info()) {
    if (table_info.name() != table) continue;
    if (table_info.signature().empty()) return 0;
    absl::StatusOr<std::vector<tf_reverb::SignatureSpec>> signature =
        tf_reverb::ParseSignature(table_info.signature());
    if (!signature.ok()) {
      return Report(absl::UnimplementedError(absl::StrCat(
                        "The signature of table '", table,
                        "' cannot be checked against: ", signature.status().message())),
                    error, error_size);
    }
    std::vector<tf_reverb::SignatureSpec> requested(num_specs);
    for (int32_t i = 0; i < num_specs; ++i) {
      requested[i].dtype = static_cast<tf_reverb::DataType>(specs[i].dtype);
      if (specs[i].rank >= 0)
        requested[i].shape.emplace(specs[i].dims, specs[i].dims + specs[i].rank);
    }
    return Report(tf_reverb::CheckRequestedSpecs(table, *signature, requested), error, error_size);
  }
  return Report(absl::NotFoundError(absl::StrCat("Priority table ", table, " was not found")),
                error, error_size);
}

TfReverbSampler* tf_reverb_sampler_new(TfReverbClient* client, const char* table,
                                       const TfReverbSamplerOptions* options, char* error,
                                       size_t error_size) {
  tf_reverb::SamplerOptions sampler_options;
  sampler_options.max_samples = options->max_samples;
  sampler_options.max_in_flight_samples_per_worker = options->max_in_flight_samples_per_worker;
  sampler_options.num_workers = options->num_workers;
  sampler_options.max_samples_per_stream = options->max_samples_per_stream;
  if (options->rate_limiter_timeout_ms >= 0) {
    sampler_options.rate_limiter_timeout = absl::Milliseconds(options->rate_limiter_timeout_ms);
  } else if (options->rate_limiter_timeout_ms != -1) {
    Report(absl::InvalidArgumentError(absl::StrCat(
               "rate_limiter_timeout_ms (", options->rate_limiter_timeout_ms, ") must be >= -1")),
           error, error_size);
    return nullptr;
  }
  if (absl::Status s = sampler_options.Validate(); !s.ok()) {
    Report(s, error, error_size);
    return nullptr;
  }
  return new TfReverbSampler{client->client->NewSampler(table, sampler_options)};
}

int tf_reverb_sampler_next(TfReverbSampler* sampler, int64_t timeout_ms, TfReverbSampleInfo* info,
                           int32_t* num_columns, TfReverbAllocateFn allocate,
                           TfReverbSetStringFn set_string, void* context, char* error,
                           size_t error_size) {
  absl::StatusOr<tf_reverb::Sample> sample = sampler->sampler->Next(
      timeout_ms < 0 ? absl::InfiniteDuration() : absl::Milliseconds(timeout_ms));
  if (!sample.ok()) return Report(sample.status(), error, error_size);
  return Report(WriteSample(*sample, info, num_columns, allocate, set_string, context), error,
                error_size);
}

void tf_reverb_sampler_close(TfReverbSampler* sampler) { sampler->sampler->Close(); }

void tf_reverb_sampler_free(TfReverbSampler* sampler) { delete sampler; }

TfReverbPatternEngine* tf_reverb_pattern_engine_new(const char* const* configs,
                                                    const size_t* config_sizes, int32_t num_configs,
                                                    char* error, size_t error_size) {
  return NewFromConfigs<TfReverbPatternEngine>(configs, config_sizes, num_configs,
                                               &tf_reverb::LocalPatternRunner::Create, error,
                                               error_size);
}

int tf_reverb_pattern_engine_append(TfReverbPatternEngine* engine,
                                    const TfReverbTensorView* columns, int32_t num_columns,
                                    int32_t end_of_episode, int32_t clear_buffers, char* error,
                                    size_t error_size) {
  absl::StatusOr<std::vector<tf_reverb::Tensor>> step = FromViews(columns, num_columns);
  if (!step.ok()) return Report(step.status(), error, error_size);
  return Report(engine->runner->Append(*std::move(step), end_of_episode != 0, clear_buffers != 0),
                error, error_size);
}

int tf_reverb_pattern_engine_pop(TfReverbPatternEngine* engine, int32_t* num_columns,
                                 TfReverbAllocateFn allocate, TfReverbSetStringFn set_string,
                                 void* context, char* error, size_t error_size) {
  std::optional<std::vector<tf_reverb::Tensor>> trajectory = engine->runner->Pop();
  if (!trajectory.has_value()) {
    return Report(absl::OutOfRangeError("No trajectory is ready."), error, error_size);
  }
  *num_columns = static_cast<int32_t>(trajectory->size());
  return Report(WriteTensors(*trajectory, allocate, set_string, context), error, error_size);
}

void tf_reverb_pattern_engine_free(TfReverbPatternEngine* engine) { delete engine; }

TfReverbStructuredWriter* tf_reverb_structured_writer_new(TfReverbClient* client,
                                                          const char* const* configs,
                                                          const size_t* config_sizes,
                                                          int32_t num_configs, char* error,
                                                          size_t error_size) {
  if (!client->client->setup_status().ok()) {
    Report(client->client->setup_status(), error, error_size);
    return nullptr;
  }
  auto create = [channel = client->client->StreamChannel()](
                    std::vector<deepmind::reverb::StructuredWriterConfig> parsed) {
    return tf_reverb::StructuredWriter::Create(channel, std::move(parsed));
  };
  return NewFromConfigs<TfReverbStructuredWriter>(configs, config_sizes, num_configs, create, error,
                                                  error_size);
}

int tf_reverb_structured_writer_append(TfReverbStructuredWriter* writer,
                                       const TfReverbTensorView* columns, int32_t num_columns,
                                       int32_t partial, char* error, size_t error_size) {
  absl::StatusOr<std::vector<tf_reverb::Tensor>> step = FromViews(columns, num_columns);
  if (!step.ok()) return Report(step.status(), error, error_size);
  std::vector<std::optional<tf_reverb::Tensor>> data;
  data.reserve(step->size());
  for (tf_reverb::Tensor& tensor : *step) data.emplace_back(std::move(tensor));
  return Report(writer->writer->Append(std::move(data), partial != 0), error, error_size);
}

int tf_reverb_structured_writer_flush(TfReverbStructuredWriter* writer,
                                      int32_t block_until_num_items, int64_t timeout_ms,
                                      char* error, size_t error_size) {
  return Report(writer->writer->Flush(block_until_num_items, TimeoutFromMs(timeout_ms)), error,
                error_size);
}

int tf_reverb_structured_writer_end_episode(TfReverbStructuredWriter* writer, int32_t clear_buffers,
                                            int64_t timeout_ms, char* error, size_t error_size) {
  return Report(writer->writer->EndEpisode(clear_buffers != 0, TimeoutFromMs(timeout_ms)), error,
                error_size);
}

void tf_reverb_structured_writer_free(TfReverbStructuredWriter* writer) { delete writer; }

}  // extern "C"
