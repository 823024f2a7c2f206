#pragma once
// Keras's JSON (model configs, compile configs) as nlohmann::json with its
// objects' keys in file order, so a layer's arguments keep Keras's order.
#include <nlohmann/json.hpp>

#include <string>

namespace trainer {

using KerasJson = nlohmann::ordered_json;

/// j[key] when j is an object holding key (not null); else fallback. Never
/// throws for a j of another type (Keras files from elsewhere may hold anything).
inline KerasJson json_at(const KerasJson& j, const char* key, const KerasJson& fallback = nullptr) {
  return j.is_object() && j.contains(key) && !j[key].is_null() ? j[key] : fallback;
}

/// j[key] when j is an object holding a string there; else "".
inline std::string json_text(const KerasJson& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

}  // namespace trainer
