#include "io/checkpoint_wire.h"

#include "core/isolated_wire.h"

namespace trainer {

namespace {

using wire::put;
using wire::put_array;
using wire::put_text;
using wire::take;
using wire::take_array;
using wire::take_count;
using wire::take_text;

template <class T>
void put_named_map(ChildSink& sink, const std::map<std::string, T>& map) {
  put<uint64_t>(sink, map.size());
  for (const auto& [name, value] : map) {
    put_text(sink, name);
    if constexpr (std::is_arithmetic_v<T>)
      put(sink, value);
    else
      put_array(sink, value);
  }
}

template <class T>
std::map<std::string, T> take_named_map(ChildOutput& in) {
  std::map<std::string, T> map;
  // Each entry is a tree node holding a name and a value: counted as such before any is made.
  for (uint64_t i = take_count(in, sizeof(typename std::map<std::string, T>::value_type) + 4 * sizeof(void*)); i > 0;
       --i) {
    std::string name = take_text(in);
    if constexpr (std::is_arithmetic_v<T>)
      map[name] = take<T>(in);
    else
      map[name] = take_array<typename T::value_type>(in);
  }
  return map;
}

}  // namespace

void send_checkpoint(ChildSink& sink, const Checkpoint& ckpt) {
  put_text(sink, ckpt.config_yaml);
  put<int64_t>(sink, ckpt.epoch);
  put_named_map(sink, ckpt.logs);
  put<uint64_t>(sink, ckpt.weights.size());
  for (const WeightRecord& w : ckpt.weights) {
    put_text(sink, w.layer);
    put_text(sink, w.name);
    put_array(sink, w.shape);
    put_array(sink, w.values);
  }
  put_named_map(sink, ckpt.state_scalars);
  put_named_map(sink, ckpt.state_arrays);
  put_named_map(sink, ckpt.state_double_arrays);
}

Checkpoint receive_checkpoint(ChildOutput& in) {
  Checkpoint ckpt;
  ckpt.config_yaml = take_text(in);
  ckpt.epoch = int(take<int64_t>(in));
  ckpt.logs = take_named_map<double>(in);
  for (uint64_t i = take_count(in, sizeof(WeightRecord)); i > 0; --i) {
    WeightRecord w;
    w.layer = take_text(in);
    w.name = take_text(in);
    w.shape = take_array<int>(in);
    w.values = take_array<float>(in);
    ckpt.weights.push_back(std::move(w));
  }
  ckpt.state_scalars = take_named_map<double>(in);
  ckpt.state_arrays = take_named_map<std::vector<float>>(in);
  ckpt.state_double_arrays = take_named_map<std::vector<double>>(in);
  return ckpt;
}

}  // namespace trainer
