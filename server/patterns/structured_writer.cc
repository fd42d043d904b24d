#include "server/patterns/structured_writer.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace tf_reverb {

absl::StatusOr<std::unique_ptr<StructuredWriter>> StructuredWriter::Create(
    std::shared_ptr<grpc::Channel> channel,
    std::vector<deepmind::reverb::StructuredWriterConfig> configs) {
  absl::StatusOr<std::unique_ptr<PatternEngine>> engine = PatternEngine::Create(std::move(configs));
  if (!engine.ok()) return engine.status();
  TrajectoryWriterOptions options;
  options.chunker_options.num_keep_alive_refs = std::max(1, (*engine)->max_age());
  options.chunker_options.max_chunk_length = 0;  // auto-tuned
  absl::StatusOr<std::unique_ptr<TrajectoryWriter>> writer =
      TrajectoryWriter::Create(std::move(channel), std::move(options));
  if (!writer.ok()) return writer.status();
  return std::unique_ptr<StructuredWriter>(
      new StructuredWriter(*std::move(engine), *std::move(writer)));
}

StructuredWriter::StructuredWriter(std::unique_ptr<PatternEngine> engine,
                                   std::unique_ptr<TrajectoryWriter> writer)
    : engine_(std::move(engine)), writer_(std::move(writer)) {}

absl::Status StructuredWriter::Append(std::vector<std::optional<Tensor>> data, bool partial) {
  absl::MutexLock lock(&mu_);
  const int num_columns = static_cast<int>(data.size());
  std::vector<bool> present(num_columns);
  for (int column = 0; column < num_columns; ++column) present[column] = data[column].has_value();
  if (absl::Status status = engine_->CheckAppend(present); !status.ok()) return status;
  // Values the engine reads (conditions, TD errors) are kept before the
  // writer takes the data.
  std::vector<std::shared_ptr<const Tensor>> values(num_columns);
  for (int column = 0; column < num_columns; ++column) {
    if (!data[column].has_value()) continue;
    if (!engine_->UsesColumn(column)) {
      data[column].reset();
    } else if (engine_->NeedsValue(column)) {
      values[column] = std::make_shared<const Tensor>(*data[column]);
    }
  }
  std::vector<std::optional<PatternCell>> cells(num_columns);
  TrajectoryWriter::StepRefs refs;
  absl::Status status = partial ? writer_->AppendPartial(std::move(data), &refs)
                                : writer_->Append(std::move(data), &refs);
  if (!status.ok()) return status;
  for (int column = 0; column < num_columns; ++column) {
    if (column < static_cast<int>(refs.size()) && refs[column].has_value()) {
      cells[column] = PatternCell{values[column], *refs[column]};
    }
  }
  std::vector<PatternItem> items;
  status = engine_->Append(std::move(cells), partial, &items);
  if (absl::Status created = CreateItems(items); status.ok()) status = created;
  return status;
}

absl::Status StructuredWriter::CreateItems(const std::vector<PatternItem>& items) {
  for (const PatternItem& item : items) {
    std::vector<TrajectoryColumn> trajectory;
    trajectory.reserve(item.columns.size());
    for (const PatternColumn& column : item.columns) {
      TrajectoryColumn out;
      out.squeeze = column.squeeze;
      out.refs.reserve(column.rows.size());
      for (const PatternCell& cell : column.rows) out.refs.push_back(cell.ref);
      trajectory.push_back(std::move(out));
    }
    if (absl::Status status = writer_->CreateItem(item.table, item.priority, trajectory);
        !status.ok()) {
      return status;
    }
    ++num_items_created_;
  }
  return absl::OkStatus();
}

absl::Status StructuredWriter::Flush(int block_until_num_items, absl::Duration timeout) {
  return writer_->Flush(block_until_num_items, timeout);
}

absl::Status StructuredWriter::EndEpisode(bool clear_buffers, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  std::vector<PatternItem> items;
  if (absl::Status status = engine_->ApplyEndOfEpisode(&items); !status.ok()) return status;
  if (absl::Status status = CreateItems(items); !status.ok()) return status;
  if (absl::Status status = writer_->EndEpisode(clear_buffers, timeout); !status.ok()) {
    return status;
  }
  engine_->StartNewEpisode(clear_buffers);
  return absl::OkStatus();
}

bool StructuredWriter::step_is_open() const {
  absl::MutexLock lock(&mu_);
  return engine_->step_is_open();
}

int64_t StructuredWriter::num_items_created() const {
  absl::MutexLock lock(&mu_);
  return num_items_created_;
}

}  // namespace tf_reverb
