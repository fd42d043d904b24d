/* The C ABI through which the TensorFlow kernel library reaches the core.
 *
 * The kernels link TensorFlow only; they dlopen the core library (the
 * tf_reverb.pybind extension) with RTLD_DEEPBIND and resolve these symbols,
 * so the process holds exactly one core and the kernels share in-process
 * servers and tables with Python.
 *
 * Contract: every function is thread-safe. Handles are owned by the caller
 * and released with tf_reverb_client_free. Functions returning int return an
 * absl/gRPC status code (0 = OK) and, on error, copy a NUL-terminated
 * message into `error` (at most error_size bytes). */
#ifndef TF_REVERB_SERVER_C_API_C_API_H_
#define TF_REVERB_SERVER_C_API_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TfReverbClient TfReverbClient;

typedef struct {
  uint64_t key;
  double probability;
  int64_t table_size;
  double priority;
  int32_t times_sampled;
} TfReverbSampleInfo;

/* A column handed to the core: dtype is TensorFlow's DataType number. For
 * DT_STRING, `data` points to `num_elements` TfReverbString values. */
typedef struct {
  int32_t dtype;
  int32_t rank;
  const int64_t* dims;
  const void* data;
  size_t num_bytes;
} TfReverbTensorView;

typedef struct {
  const char* data;
  size_t size;
} TfReverbString;

/* Called once per output column: returns the buffer to fill (numeric
 * dtypes), or NULL to abort the call with an error. */
typedef void* (*TfReverbAllocateFn)(void* context, int32_t column, int32_t dtype, int32_t rank,
                                    const int64_t* dims);
/* Called for each element of a DT_STRING column instead of filling a buffer. */
typedef void (*TfReverbSetStringFn)(void* context, int32_t column, int64_t index, const char* data,
                                    size_t size);

TfReverbClient* tf_reverb_client_new(const char* server_address);
void tf_reverb_client_free(TfReverbClient* client);

/* Samples one item of `table` (timeout_ms < 0: no timeout) and writes its
 * FIRST TIMESTEP through `allocate` / `set_string` (TFClient.sample, as in
 * Reverb): row 0 of every unsqueezed column, without the time axis; a
 * squeezed column as it is. Later timesteps are dropped. */
int tf_reverb_client_sample(TfReverbClient* client, const char* table, int64_t timeout_ms,
                            TfReverbSampleInfo* info, TfReverbAllocateFn allocate,
                            TfReverbSetStringFn set_string, void* context, char* error,
                            size_t error_size);

/* Inserts one step of `num_columns` columns as one item per table, of
 * policy version `policy_version` (< 0: each table's current version). */
int tf_reverb_client_insert(TfReverbClient* client, const TfReverbTensorView* columns,
                            int32_t num_columns, const char* const* tables,
                            const double* priorities, int32_t num_tables, int64_t policy_version,
                            char* error, size_t error_size);

/* Updates the priorities of `num_keys` items of `table`; absent keys are
 * ignored. */
int tf_reverb_client_update_priorities(TfReverbClient* client, const char* table,
                                       const uint64_t* keys, const double* priorities,
                                       int64_t num_keys, char* error, size_t error_size);

/* One column a dataset requests: TensorFlow's DataType number and a partial
 * shape (rank -1: unknown rank; a dimension -1: unknown). */
typedef struct {
  int32_t dtype;
  int32_t rank;
  const int64_t* dims;
} TfReverbSpec;

/* Checks the `num_specs` columns a dataset requests from `table` against the
 * table's signature (signature.h's CheckRequestedSpecs), asking the server
 * for it and waiting up to timeout_ms (< 0: forever). OK when they match or
 * the table has no signature; INVALID_ARGUMENT in Reverb's words when they
 * do not; NOT_FOUND for an unknown table; DEADLINE_EXCEEDED when the server
 * did not answer in time; UNIMPLEMENTED when the signature does not parse
 * or has a leaf that is not a tensor spec (samples must then be checked as
 * they arrive). */
int tf_reverb_client_check_requested_specs(TfReverbClient* client, const char* table,
                                           int64_t timeout_ms, const TfReverbSpec* specs,
                                           int32_t num_specs, char* error, size_t error_size);

/* ---- Samplers (TrajectoryDataset / TimestepDataset) ----------------------
 * A sampler is sampler.h's Sampler over `client`'s server: worker threads
 * prefetch samples; tf_reverb_sampler_next hands out one at a time and
 * decompresses it straight into the buffers `allocate` returns. Values of
 * TfReverbSamplerOptions follow the datasets: -1 means "default" for every
 * field (max_samples: unlimited, num_workers: 1, max_samples_per_stream:
 * 10 000, rate_limiter_timeout_ms: infinite); rate_limiter_timeout_ms 0 means
 * "immediately". */
typedef struct TfReverbSampler TfReverbSampler;

typedef struct {
  int64_t max_samples;
  int64_t max_in_flight_samples_per_worker;
  int64_t num_workers;
  int64_t max_samples_per_stream;
  int64_t rate_limiter_timeout_ms;
} TfReverbSamplerOptions;

/* Returns NULL and fills `error` for invalid options. The sampler keeps what
 * it needs of `client`, which may be freed first. */
TfReverbSampler* tf_reverb_sampler_new(TfReverbClient* client, const char* table,
                                       const TfReverbSamplerOptions* options, char* error,
                                       size_t error_size);

/* Blocks for the next sample (timeout_ms < 0: no timeout), fills `info`,
 * calls `allocate` once per column in order (then `set_string` for the
 * elements of DT_STRING columns) and decodes the numeric columns into the
 * returned buffers. `*num_columns` receives the sample's column count.
 * Returns OUT_OF_RANGE (11) once max_samples were returned,
 * DEADLINE_EXCEEDED (4) on a rate-limiter timeout, CANCELLED (1) after
 * tf_reverb_sampler_close, and the allocator's failure as ABORTED (10). */
int tf_reverb_sampler_next(TfReverbSampler* sampler, int64_t timeout_ms, TfReverbSampleInfo* info,
                           int32_t* num_columns, TfReverbAllocateFn allocate,
                           TfReverbSetStringFn set_string, void* context, char* error,
                           size_t error_size);

/* Cancels the sampler's requests and wakes blocked callers; thread-safe, may
 * run while another thread is inside tf_reverb_sampler_next. */
void tf_reverb_sampler_close(TfReverbSampler* sampler);

/* Closes and frees; no call on `sampler` may be in progress. */
void tf_reverb_sampler_free(TfReverbSampler* sampler);

/* ---- Structured writers (graph-mode StructuredWriter) --------------------
 * server/patterns/structured_writer.h over `client`'s channel. */
typedef struct TfReverbStructuredWriter TfReverbStructuredWriter;

/* `configs` as for tf_reverb_pattern_engine_new. Returns NULL and fills
 * `error` for configs that do not parse or are invalid. The writer keeps
 * what it needs of `client`, which may be freed first. */
TfReverbStructuredWriter* tf_reverb_structured_writer_new(TfReverbClient* client,
                                                          const char* const* configs,
                                                          const size_t* config_sizes,
                                                          int32_t num_configs, char* error,
                                                          size_t error_size);

/* Appends one step (or, with `partial` != 0, part of the open step) and
 * creates the items of the configs that apply. */
int tf_reverb_structured_writer_append(TfReverbStructuredWriter* writer,
                                       const TfReverbTensorView* columns, int32_t num_columns,
                                       int32_t partial, char* error, size_t error_size);

/* Flush / EndEpisode of the StructuredWriter; timeout_ms < 0: no timeout. */
int tf_reverb_structured_writer_flush(TfReverbStructuredWriter* writer,
                                      int32_t block_until_num_items, int64_t timeout_ms,
                                      char* error, size_t error_size);
int tf_reverb_structured_writer_end_episode(TfReverbStructuredWriter* writer, int32_t clear_buffers,
                                            int64_t timeout_ms, char* error, size_t error_size);

void tf_reverb_structured_writer_free(TfReverbStructuredWriter* writer);

/* ---- Pattern engines (PatternDataset) ----------------------------------
 * A pattern engine runs StructuredWriterConfigs over steps held in memory
 * (server/patterns/local_pattern_runner.h); no server is involved. */
typedef struct TfReverbPatternEngine TfReverbPatternEngine;

/* `configs` are `num_configs` serialized StructuredWriterConfig protos of
 * the given sizes (likewise for structured writers). Returns NULL and fills
 * `error` when a config does not parse or is invalid. */
TfReverbPatternEngine* tf_reverb_pattern_engine_new(const char* const* configs,
                                                    const size_t* config_sizes, int32_t num_configs,
                                                    char* error, size_t error_size);

/* Appends one step of `num_columns` columns and queues the trajectories it
 * produces; with `end_of_episode` != 0 the end-of-episode configs apply next
 * and a new episode starts (buffers dropped if `clear_buffers` != 0). */
int tf_reverb_pattern_engine_append(TfReverbPatternEngine* engine,
                                    const TfReverbTensorView* columns, int32_t num_columns,
                                    int32_t end_of_episode, int32_t clear_buffers, char* error,
                                    size_t error_size);

/* Writes the oldest queued trajectory through `allocate` / `set_string`
 * (one column per pattern node; `*num_columns` receives the count).
 * Returns OUT_OF_RANGE (11) when none is queued, ABORTED (10) when the
 * allocator fails. */
int tf_reverb_pattern_engine_pop(TfReverbPatternEngine* engine, int32_t* num_columns,
                                 TfReverbAllocateFn allocate, TfReverbSetStringFn set_string,
                                 void* context, char* error, size_t error_size);

void tf_reverb_pattern_engine_free(TfReverbPatternEngine* engine);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TF_REVERB_SERVER_C_API_C_API_H_ */
