#include "core/exit_codes.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <new>
#include <string>

#include "core/error.h"

namespace trainer {

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::Success& e) {  // --help, --help-all, --version
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUserError;
  }
}

namespace {
std::string g_origin;  ///< set_error_origin's text.
}  // namespace

void set_error_origin(const std::string& origin) { g_origin = origin; }

void print_run_error(const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "error: %s\n", message.c_str());
}

int run_guarded(const std::function<int()>& body, const char* out_of_memory) {
  try {
    return body();
  } catch (const ReportedUserError&) {
    std::fflush(stdout);
    return kExitUserError;
  } catch (const UserError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%serror: %s\n", g_origin.c_str(), e.what());
    return kExitUserError;
  } catch (const std::bad_alloc& e) {
    std::fflush(stdout);
    if (out_of_memory) {
      std::fprintf(stderr, "%serror: %s\n", g_origin.c_str(), out_of_memory);
      return kExitUserError;
    }
    std::fprintf(stderr, "%sinternal error: %s\n", g_origin.c_str(), e.what());
    return kExitInternalError;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%sinternal error: %s\n", g_origin.c_str(), e.what());
    return kExitInternalError;
  }
}

}  // namespace trainer
