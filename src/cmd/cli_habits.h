// What every dais role does the same way on its command line (docs/operations.md):
// `--version`, `--config FILE` (CLI11's TOML / INI: `flag = value` per line, a role's flags by
// their long names), `--help` with flags in groups, and suggestions for a misspelt subcommand
// or flag.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <utility>
#include <vector>

namespace dais::cmd {

// The version of this build (CMake's project version).
const char* DaisVersion();

// `--version` on `app` and each of its subcommands, recursively; `--config` on each role
// (the top app's subcommands).
void AddCommonFlags(CLI::App* app);

// A section of `--help`: the flags whose long name contains one of `patterns`; a group with no
// patterns takes the flags no other group took.
struct FlagGroup {
  std::string title;
  std::vector<std::string> patterns;
};
// Sorts the flags of `app` into groups (the first group whose pattern matches wins) and makes
// `--help` list the groups in the order given, after --help / --version / --config.
void GroupFlags(CLI::App* app, const std::vector<FlagGroup>& groups);
// The groups of the server roles' flags (serve, node, gateway).
const std::vector<FlagGroup>& ServerFlagGroups();

// tritonserver's flags that dais does not implement (`--exit-on-error`, `--log-format`, ...):
// accepted, so that a tritonserver command line starts dais; WarnUnimplementedFlags then names
// each one given (a warning in the log, once at start).
void AcceptTritonFlags(CLI::App* app);
void WarnUnimplementedFlags(const CLI::App* app);

// Parses like CLI11_PARSE; on a parse error also prints what the user probably meant (a
// subcommand or a long flag within two edits, or one the word is a prefix of). Returns -1 when
// the command line was parsed and the program should go on, else the exit code.
int ParseCommandLine(CLI::App& app, int argc, char** argv);

// A bash completion script for `app` (`dais completion bash`): subcommands and long flags at
// each level of the command tree, plus `extra` words after a command path ("ctl get" -> the
// kinds). Installed with `source <(dais completion bash)` or into
// /usr/share/bash-completion/completions/dais.
std::string BashCompletion(const CLI::App& app,
                           const std::vector<std::pair<std::string, std::string>>& extra);

// The subcommand of `app` named `name`, or nullptr (roles differ between builds).
CLI::App* FindSubcommand(CLI::App& app, const std::string& name);

// The candidates closest to `word` (edit distance ≤ 2, or starting with it), best first.
std::vector<std::string> Suggest(const std::string& word, const std::vector<std::string>& names);

}  // namespace dais::cmd
