#include "config/yaml_text.h"

#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "config/params.h"
#include "core/error.h"

namespace trainer {

void refuse_binary(const std::string& text, const std::string& path) {
  // HDF5's signature: a checkpoint given as the config (YAML would say "unknown escape character: \x00").
  if (text.compare(0, 8, "\x89HDF\r\n\x1a\n") == 0)
    throw UserError(path + " is an HDF5 file (a checkpoint?), not a YAML config: give the run's config with "
                    "--config (a checkpoint goes to --resume, or to predict, evaluate and export's --checkpoint)");
  if (const size_t nul = text.find('\0'); nul != std::string::npos) {
    const size_t line = size_t(std::count(text.begin(), text.begin() + long(nul), '\n')) + 1;
    const size_t col = nul - (text.rfind('\n', nul) == std::string::npos ? 0 : text.rfind('\n', nul) + 1) + 1;
    throw UserError(path + ":" + std::to_string(line) + ":" + std::to_string(col) + ": a NUL byte, which YAML text "
                    "never holds (a binary file, or text saved as UTF-16?); give the YAML config saved as UTF-8");
  }
}

namespace {

/// The UserError for yaml-cpp's syntax error e in text: its place, its message with control bytes escaped,
/// and a hint for a tab in the indentation or a double quote left open.
UserError syntax_error(const YAML::ParserException& e, const std::string& text, const std::string& path) {
  // YAML forbids tabs in indentation; yaml-cpp's message does not always
  // say so. Looked for on the error's line and the one before it.
  std::string hint;
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line) && hint.empty();) {
    if (++number > e.mark.line + 1) break;
    const size_t first = line.find_first_not_of(" \t");
    if (number >= e.mark.line && first != std::string::npos && line.find('\t') < first)
      hint = " (line " + std::to_string(number) + " is indented with a tab; YAML allows only spaces there)";
  }
  // An unclosed double quote in a {...} or [...] makes yaml-cpp report the end of the file ("fp.yaml:42:1:
  // end of map flow not found" for a 41-line file whose quote opened on line 40).
  std::istringstream again(text);
  number = 0;
  for (std::string line; hint.empty() && std::getline(again, line);) {
    ++number;
    bool open = false;  // inside "..." (a # there is no comment)
    for (size_t k = 0; k < line.size(); ++k) {
      if (line[k] == '"' && (k == 0 || line[k - 1] != '\\')) open = !open;
      if (line[k] == '#' && !open && (k == 0 || line[k - 1] == ' ')) break;
    }
    if (open) hint = " (line " + std::to_string(number) + " opens a \" that it does not close)";
  }
  // yaml-cpp quotes the offending byte as it is; a control byte would garble the terminal.
  std::string msg;
  for (unsigned char ch : e.msg) {
    if (ch >= 0x20 && ch != 0x7f) {
      msg += char(ch);
    } else {
      static const char* hex = "0123456789abcdef";
      msg += std::string("\\x") + hex[ch >> 4] + hex[ch & 15];
    }
  }
  return UserError(yaml_location(path, e.mark) + ": YAML syntax error: " + msg + hint);
}

/// What load_one_document keeps of a document's events (yaml-cpp's event parser): whether it holds
/// anything but an empty value, and where its first node begins.
class DocumentEvents : public YAML::EventHandler {
 public:
  bool content = false;
  YAML::Mark first = YAML::Mark::null_mark();

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { node(mark, false); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { node(mark, true); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t, const std::string&) override {
    node(mark, true);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    node(mark, true);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node(mark, true);
  }
  void OnMapEnd() override {}

 private:
  void node(const YAML::Mark& mark, bool filled) {
    if (first.is_null()) first = mark;
    content = content || filled;
  }
};

/// The documents of text, each as DocumentEvents. yaml-cpp's parser neither takes nor reports a token that
/// cannot begin a node where a document's node begins (a ',' there: "- 1\n,"); each further document is then
/// an empty one at that same place, without end (YAML::LoadAll fills the memory). That is a syntax error here.
std::vector<DocumentEvents> documents(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  std::vector<DocumentEvents> docs;
  for (DocumentEvents d; parser.HandleNextDocument(d); d = DocumentEvents()) {
    if (!d.content && !docs.empty() && !docs.back().content && d.first.pos == docs.back().first.pos) {
      const char c = d.first.pos >= 0 && size_t(d.first.pos) < text.size() ? text[size_t(d.first.pos)] : ' ';
      throw UserError(yaml_location(path, d.first) + ": YAML syntax error: a value cannot begin with '" +
                      std::string(1, c) + "' here" + (c == ',' ? " (',' separates the entries of [ ] and { })" : ""));
    }
    docs.push_back(d);
  }
  return docs;
}

}  // namespace

YAML::Node load_one_document(const std::string& text, const std::string& path) {
  bool several = false;
  try {
    std::vector<DocumentEvents> docs = documents(text, path);
    while (docs.size() > 1 && !docs.back().content) docs.pop_back();  // a trailing '---' with nothing after it
    several = docs.size() > 1;
  } catch (const YAML::ParserException& e) {
    // A syntax error in the first document is reported as such; in a later one it also means there are more.
    try {
      (void)YAML::Load(text);
    } catch (const YAML::ParserException& first) {
      throw syntax_error(first, text, path);
    }
    several = true;
  }
  if (several)
    throw UserError(path + ": the file holds more than one YAML document (a line '---' starts another); a config "
                           "is one document: remove the '---' line and merge the sections");
  return YAML::Load(text);
}

}  // namespace trainer
