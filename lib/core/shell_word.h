#pragma once
// Command lines printed for the user to copy (a stopped run's continuation).
#include <string>
#include <vector>

namespace trainer {

/// s as one word of a POSIX shell command: unchanged when it holds only
/// letters, digits and _ . / : = @ % + , - (and is not empty), else in single
/// quotes, each ' written as '\'' (POSIX.1-2017, Shell Command Language 2.2.3).
std::string shell_word(const std::string& s);

/// args (argv as given) as a command to run again with " --resume <file>"
/// appended: each a shell_word, without --resume, --overwrite and
/// --initial-weights (and their values, as "--resume X" or "--resume=X").
std::string command_without_resume(const std::vector<std::string>& args);

}  // namespace trainer
