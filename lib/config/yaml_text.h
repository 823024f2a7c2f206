#pragma once
// A config file's text as one YAML document (yaml-cpp), with the errors for
// text that is no YAML at all, YAML syntax errors and several documents.
#include <yaml-cpp/yaml.h>

#include <string>

namespace trainer {

/// Throws UserError naming path for text that is no YAML config at all: an
/// HDF5 file (a checkpoint given as the config), or text holding a NUL byte
/// (a binary file, UTF-16), with the NUL's line and column.
void refuse_binary(const std::string& text, const std::string& path);

/// text's one YAML document. Throws UserError "<path>:<line>:<col>: YAML
/// syntax error: <yaml-cpp's message>" (control bytes escaped, with a hint
/// for a tab in the indentation or a double quote left open), also for a
/// token that cannot begin a value where the document's value begins (a
/// ',' at the top level, which yaml-cpp's LoadAll would loop on without
/// end); or naming path when the text holds more than one document (a
/// '---' line; yaml-cpp's Load reads the first and drops the rest). A
/// trailing '---' with nothing after it is no second document.
YAML::Node load_one_document(const std::string& text, const std::string& path);

}  // namespace trainer
