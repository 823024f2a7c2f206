#include "keras/keras_file_wire.h"

#include "core/isolated_wire.h"

namespace trainer {

namespace {

/// JSON the child dumped from what it parsed.
KerasJson json_from(ChildOutput& in) {
  KerasJson j = KerasJson::parse(wire::take_text(in), nullptr, false);
  if (j.is_discarded()) in.malformed("JSON that does not parse");
  return j;
}

}  // namespace

void send_keras_file(ChildSink& sink, const KerasModelFile& file) {
  wire::put(sink, file.format);
  wire::put_text(sink, file.model.dump());
  wire::put_text(sink, file.compile.dump());
  wire::put_text(sink, file.keras_version);
  wire::put<uint64_t>(sink, file.weights.size());
  for (const KerasLayerWeights& w : file.weights) {
    wire::put_text(sink, w.layer);
    wire::put<uint64_t>(sink, w.names.size());
    for (const std::string& name : w.names) wire::put_text(sink, name);
    wire::put<uint64_t>(sink, w.arrays.size());
    for (const h5::FloatArray& a : w.arrays) {
      wire::put_array(sink, a.shape);
      wire::put_array(sink, a.values);
    }
  }
}

KerasModelFile receive_keras_file(ChildOutput& in) {
  KerasModelFile file;
  file.format = wire::take<KerasFormat>(in);
  if (file.format != KerasFormat::Keras && file.format != KerasFormat::LegacyH5 && file.format != KerasFormat::Json)
    in.malformed("a Keras file format of " + std::to_string(int(file.format)));
  file.model = json_from(in);
  file.compile = json_from(in);
  file.keras_version = wire::take_text(in);
  for (uint64_t i = wire::take_count(in, sizeof(KerasLayerWeights)); i > 0; --i) {
    KerasLayerWeights w;
    w.layer = wire::take_text(in);
    for (uint64_t j = wire::take_count(in, sizeof(std::string)); j > 0; --j) w.names.push_back(wire::take_text(in));
    for (uint64_t j = wire::take_count(in, sizeof(h5::FloatArray)); j > 0; --j) {
      h5::FloatArray a;
      a.shape = wire::take_array<int>(in);
      a.values = wire::take_array<float>(in);
      w.arrays.push_back(std::move(a));
    }
    file.weights.push_back(std::move(w));
  }
  return file;
}

}  // namespace trainer
