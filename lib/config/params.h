#pragma once
// ParamReader: typed, validated access to one YAML mapping of a config file.
// Every error is a UserError of the form
//   "<file>:<line>:<column>: <what>: <problem>. <fix>"
// (line and column 1-based, pointing at the offending key or value), so a user
// can jump straight to the place. finish() rejects keys nobody read, with a
// did-you-mean suggestion and the list of known keys.
#include <yaml-cpp/yaml.h>

#include <climits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/ascii.h"

namespace trainer {

/// "file:line:col" for a YAML mark (yaml-cpp marks are 0-based; this prints 1-based).
std::string yaml_location(const std::string& file, const YAML::Mark& mark);

/// " (did you mean 'x'?)" when some option is within edit distance 2 (or a
/// case-insensitive match) of word, or word is an older Keras name of an
/// option ('lr' for 'learning_rate'), else "". Levenshtein distance.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& options);

/// " (a Python tuple is a YAML list: [1, 2], not (1, 2))" when text (a YAML
/// scalar as written) starts with '(', with a note on { } entries when it is
/// cut short; else "".
std::string python_tuple_hint(const std::string& text);

/// "a, b, c" from a list of names.
std::string join_names(const std::vector<std::string>& names);

/// A Python call as written in Keras code, e.g.
/// "keras.losses.BinaryFocalCrossentropy(gamma=2.0, from_logits=True)", as
/// the mapping a config takes instead: "{type: BinaryFocalCrossentropy,
/// gamma: 2.0, from_logits: true}" (True/False/None as YAML's, Keras 2's lr
/// as learning_rate; a positional argument of a loss, optimizer or callback
/// class under its Keras 3 parameter name, "Adam(1e-4)" as "{type: Adam,
/// learning_rate: 1e-4}"; others are listed after the mapping, to be named);
/// "" when text is not such a call.
std::string python_call_mapping(const std::string& text);

class ParamReader {
 public:
  /// node: a YAML mapping (else UserError); file: the config path for messages;
  /// what: the object being read, e.g. "layer 'conv1' (Conv2D)".
  ParamReader(const YAML::Node& node, std::string file, std::string what);

  bool has(const std::string& key) const;
  /// has() for an optional key of this mapping that is read only when present:
  /// either way key is then among finish()'s known keys and suggestions
  /// (has() alone also checks for keys that are refused).
  bool has_optional(const std::string& key);
  /// Whether key is present with a value other than null (Keras's None, which
  /// means "the default"); a null key counts as read, and key is known (as
  /// with has_optional) either way.
  bool given(const std::string& key);
  /// Integer in [min, max]; required when def is empty.
  int get_int(const std::string& key, std::optional<int> def, int min = INT_MIN, int max = INT_MAX);
  /// Real number in [min, max]; required when def is empty.
  double get_double(const std::string& key, std::optional<double> def, double min = -1e300,
                    double max = 1e300);
  bool get_bool(const std::string& key, std::optional<bool> def);
  /// String; when allowed is non-empty the value must be one of them.
  std::string get_string(const std::string& key, std::optional<std::string> def,
                         const std::vector<std::string>& allowed = {});
  /// A file or folder path: get_string, refusing control characters (such
  /// as a \0 or a newline from a double-quoted YAML escape), which a path
  /// cannot hold safely and which would cut or split the messages naming it.
  std::string get_path(const std::string& key, std::optional<std::string> def);
  /// A string or a list of strings.
  std::vector<std::string> get_string_list(const std::string& key,
                                           std::optional<std::vector<std::string>> def);
  /// Keras's int-or-tuple: `3` or `[3, 3]` -> {3, 3}; each in [min, max].
  std::vector<int> get_int_pair(const std::string& key, std::optional<std::vector<int>> def,
                                int min = 1, int max = INT_MAX);
  /// A list of exactly len integers, each in [min, max].
  std::vector<int> get_int_list(const std::string& key, size_t len, int min = 1, int max = INT_MAX);
  /// The raw node (marked as read); an undefined node when absent.
  YAML::Node get_node(const std::string& key);

  /// Marks a key as read by someone else (e.g. 'name', 'type' read by the model builder).
  void skip(const std::string& key) { used_.insert(key); }
  /// Throws for every key that no getter asked for.
  void finish() const;
  /// Throws "<where key>: <what>: <msg>".
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const;
  /// Throws at the mapping itself.
  [[noreturn]] void fail(const std::string& msg) const;
  /// For a key that is absent: " ('<other>' is there: did you mean '<key>'?)"
  /// when a key of the mapping that no getter or has_optional() has asked
  /// for is a misspelling of it (edit distance
  /// 2) or holds it with more around it (train_images, dataset for data); else "".
  std::string given_instead(const std::string& key) const;
  /// The key given_instead names ("" when none).
  std::string key_given_instead(const std::string& key) const;
  /// "file:line:col" of the key itself (of the mapping when absent): where a
  /// misspelt key is.
  std::string key_where(const std::string& key) const;
  /// "file:line:col" of the key's value (or of the mapping when absent).
  std::string where(const std::string& key) const;
  const std::string& file() const { return file_; }
  const std::string& what() const { return what_; }

 private:
  YAML::Node value(const std::string& key, bool required);
  YAML::Node node_;
  std::string file_, what_;
  std::set<std::string> used_;
  std::set<std::string> optional_;  ///< Keys has_optional() looked for: known, read or not.
};

}  // namespace trainer
