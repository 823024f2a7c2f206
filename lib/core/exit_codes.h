#pragma once
// What the project's binaries (trainer, dsb_to_flat, preview, plot_curves) do
// with what escapes their work, in one place: the exit codes and the message
// lines on stderr.
//
// Exit codes: 0 done, 2 user error (flags, config, data, paths), 1 internal error.
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace trainer {

inline constexpr int kExitOk = 0;
inline constexpr int kExitInternalError = 1;
inline constexpr int kExitUserError = 2;

/// Parses the command line into app. Returns std::nullopt when the program
/// should go on, else the exit code to return at once: 0 after --help or
/// --version (printed on stdout by app.exit), 2 after a parse error (printed
/// on err, std::cerr by default, by app.exit with the app's failure_message:
/// CLI11's default is "<what>\nRun with --help for more information.").
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv, std::ostream& err = std::cerr);

/// Runs body and returns its exit code. What escapes it is reported on stderr
/// in one line, after stdout is flushed (so the line comes after what was
/// printed before it), and with set_json_errors on, first as the JSON object
/// {"done": false, "error": "<message>"} on stdout:
///   ReportedUserError  -> nothing more (printed already), exit 2;
///   UserError          -> "error: <message>", exit 2;
///   std::bad_alloc     -> with out_of_memory set: "error: <out_of_memory>",
///                         exit 2; without: as any other exception;
///   other std::exception -> "internal error: <what>", exit 1.
int run_guarded(const std::function<int()>& body, const char* out_of_memory = nullptr);

/// An error that one process prints for a run of several (ReportedUserError).
struct RunError {
  std::string origin;   ///< The process that found it, e.g. "rank 1 (host node2): "; "" when every one did.
  std::string message;  ///< UserError's text.
};
/// Prints errors as run_guarded prints a UserError, each "<origin>error:
/// <message>" on stderr; with set_json_errors on, the first one also as the
/// JSON object on stdout, before them.
void print_run_errors(const std::vector<RunError>& errors);

/// Text that run_guarded puts before each error line, naming which process of
/// a run of several wrote it (e.g. "rank 1 (host node2): "); "" by default.
void set_error_origin(const std::string& origin);
/// With on, errors are also printed as a final JSON object on stdout, for a
/// consumer of `trainer --log-format json` (its other objects are one per
/// epoch). Off by default.
void set_json_errors(bool on);

}  // namespace trainer
