#pragma once
// Keras's JSON (model configs, compile configs) as nlohmann::json with its
// objects' keys in file order, so a layer's arguments keep Keras's order.
#include <nlohmann/json.hpp>

namespace trainer {

using KerasJson = nlohmann::ordered_json;

}  // namespace trainer
