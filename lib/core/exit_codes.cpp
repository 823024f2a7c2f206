#include "core/exit_codes.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <new>
#include <string>

#include "core/error.h"
#include "core/json_text.h"

namespace trainer {

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv, std::ostream& err) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::Success& e) {  // --help, --help-all, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e, std::cout, err);
    return kExitUserError;
  }
}

namespace {

std::string g_origin;  ///< set_error_origin's text.
bool g_json = false;   ///< set_json_errors's choice.

/// "<origin><kind>: <message>" on stderr after stdout; when json, first the JSON object, whose error names
/// the origin only when it is another process's (rank 0 prints the objects).
void print_error(const char* kind, const std::string& origin, const std::string& message, bool json) {
  const std::string other = origin == g_origin ? "" : origin;
  if (json) std::printf("{\"done\": false, \"error\": %s}\n", json_string(other + message).c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "%s%s: %s\n", origin.c_str(), kind, message.c_str());
}

}  // namespace

void set_error_origin(const std::string& origin) { g_origin = origin; }
void set_json_errors(bool on) { g_json = on; }

void print_run_errors(const std::vector<RunError>& errors) {
  for (size_t i = 0; i < errors.size(); ++i)
    print_error("error", errors[i].origin, errors[i].message, g_json && i == 0);
}

int run_guarded(const std::function<int()>& body, const char* out_of_memory) {
  try {
    return body();
  } catch (const ReportedUserError&) {
    std::fflush(stdout);
    return kExitUserError;
  } catch (const UserError& e) {
    print_error("error", g_origin, e.what(), g_json);
    return kExitUserError;
  } catch (const std::bad_alloc& e) {
    if (out_of_memory) {
      print_error("error", g_origin, out_of_memory, g_json);
      return kExitUserError;
    }
    print_error("internal error", g_origin, e.what(), g_json);
    return kExitInternalError;
  } catch (const std::exception& e) {
    print_error("internal error", g_origin, e.what(), g_json);
    return kExitInternalError;
  }
}

}  // namespace trainer
