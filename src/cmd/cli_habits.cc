#include "cmd/cli_habits.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>
#include <string_view>

#include "common/logging.h"

#ifndef DAIS_VERSION
#define DAIS_VERSION "unknown"
#endif

namespace dais::cmd {
namespace {

// Edits between two words, a swap of neighbours counting as one (optimal string alignment):
// "sevre" is one edit from "serve".
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1] ? 1 : 0)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::vector<std::string> SubcommandNames(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  return names;
}

// The long flag names (without dashes) an app and, through fallthrough, its parents accept.
std::vector<std::string> LongFlags(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::App* a = app; a != nullptr; a = a->get_parent()) {
    for (const CLI::Option* opt : a->get_options()) {
      for (const std::string& l : opt->get_lnames()) names.push_back(l);
    }
    if (!a->get_fallthrough()) break;
  }
  return names;
}

// Walks the words as CLI11 would descend the subcommands, and says what was probably meant by
// the first word that names no subcommand where one is expected, and by each unknown long flag.
std::vector<std::string> Hints(const CLI::App& top, int argc, char** argv) {
  std::vector<std::string> hints;
  const CLI::App* app = &top;
  for (int i = 1; i < argc; ++i) {
    const std::string_view word = argv[i];
    if (word == "--") break;
    if (word.starts_with("--")) {
      const std::string name(word.substr(2, word.find('=') - 2));
      auto known = LongFlags(app);
      if (std::find(known.begin(), known.end(), name) != known.end()) continue;
      auto near = Suggest(name, known);
      if (!near.empty()) {
        hints.push_back(
            fmt::format("unknown flag --{}: did you mean --{}?", name, fmt::join(near, " or --")));
      }
      continue;
    }
    if (word.starts_with("-")) continue;
    auto subs = SubcommandNames(app);
    if (subs.empty()) continue;  // a positional argument or a flag's value
    if (std::find(subs.begin(), subs.end(), word) != subs.end()) {
      app = app->get_subcommand(std::string(word));
      continue;
    }
    auto near = Suggest(std::string(word), subs);
    if (!near.empty()) {
      hints.push_back(fmt::format("unknown command '{}' for '{}': did you mean '{}'?", word,
                                  app->get_parent() == nullptr ? "dais" : app->get_name(),
                                  fmt::join(near, "' or '")));
      break;
    }
    // A flag's value (`--etcd host:2379`) also lands here: only a near miss is worth a word.
  }
  return hints;
}

}  // namespace

const char* DaisVersion() { return DAIS_VERSION; }

namespace {

// The roles whose --config is a file of flags (AddCommonFlags), read by ParseCommandLine.
std::set<const CLI::App*>& FlagFileRoles() {
  static std::set<const CLI::App*> roles;
  return roles;
}

}  // namespace

namespace {

void CompletionTable(const CLI::App& app, const std::string& path,
                     const std::vector<std::pair<std::string, std::string>>& extra,
                     std::string* out) {
  std::vector<std::string> words;
  auto subs = app.get_subcommands([](const CLI::App*) { return true; });
  for (const CLI::App* sub : subs) words.push_back(sub->get_name());
  for (const std::string& l : LongFlags(&app)) {  // with a fallthrough parent's (ctl's --etcd)
    if (std::find(words.begin(), words.end(), "--" + l) == words.end()) words.push_back("--" + l);
  }
  for (const auto& [at, more] : extra) {
    if ("dais " + at == path) words.push_back(more);
  }
  *out += fmt::format("  [\"{}\"]=\"{}\"\n", path, fmt::join(words, " "));
  for (const CLI::App* sub : subs) {
    CompletionTable(*sub, path + " " + sub->get_name(), extra, out);
  }
}

}  // namespace

std::string BashCompletion(const CLI::App& app,
                           const std::vector<std::pair<std::string, std::string>>& extra) {
  std::string table;
  CompletionTable(app, "dais", extra, &table);  // bash refuses an empty key: the root is "dais"
  return "# bash completion for dais (dais completion bash): subcommands and flags per level\n"
         "declare -gA _dais_words=(\n" +
         table +
         ")\n"
         "_dais() {\n"
         "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" path=dais next i\n"
         "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
         "    [[ ${COMP_WORDS[i]} == -* ]] && continue\n"
         "    next=\"$path ${COMP_WORDS[i]}\"\n"
         "    [[ -n ${_dais_words[$next]+set} ]] && path=\"$next\"\n"
         "  done\n"
         "  COMPREPLY=($(compgen -W \"${_dais_words[$path]}\" -- \"$cur\"))\n"
         "}\n"
         "complete -o default -F _dais dais\n";
}

CLI::App* FindSubcommand(CLI::App& app, const std::string& name) {
  auto subs = app.get_subcommands([&](const CLI::App* a) { return a->get_name() == name; });
  return subs.empty() ? nullptr : subs.front();
}

std::vector<std::string> Suggest(const std::string& word, const std::vector<std::string>& names) {
  std::vector<std::pair<size_t, std::string>> scored;
  for (const std::string& n : names) {
    if (n == word || n.empty()) continue;
    const size_t d = EditDistance(word, n);
    const bool prefix = word.size() >= 3 && n.starts_with(word);
    if (d <= std::min<size_t>(2, std::max<size_t>(1, word.size() / 3)) || prefix) {
      scored.emplace_back(prefix ? 0 : d, n);
    }
  }
  std::sort(scored.begin(), scored.end());
  std::vector<std::string> out;
  for (auto& [d, n] : scored) {
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
    if (out.size() == 3) break;
  }
  return out;
}

void AddCommonFlags(CLI::App* app) {
  // A command whose --version names a model version (`ctl rollout start --version 2`) keeps it.
  if (app->get_option_no_throw("--version") == nullptr) {
    app->set_version_flag("--version", std::string("dais ") + DaisVersion(),
                          "Print the version and exit");
  }
  if (app->get_parent() != nullptr && app->get_parent()->get_parent() == nullptr &&
      app->get_option_no_throw("--config") == nullptr) {
    // A role (`dais serve`, `dais node`, ...): its flags can come from a file. (`dais train`
    // and `dais txn` keep their own --config: training.yaml, the transactions file.)
    // Read by ParseCommandLine (CLI11 2.1 reads only the top app's config file).
    FlagFileRoles().insert(app);
    app->add_option("--config",
                    "Read flags from a TOML/INI file (`flag = value` per line, as the "
                    "long flags are named; a flag on the command line wins)");
  }
  if (app->get_parent() != nullptr && app->get_parent()->get_parent() == nullptr &&
      app->get_option_no_throw("--log-format") == nullptr) {
    // Every role logs; tritonserver's values name dais's text format as well.
    app->add_option_function<std::string>(
           "--log-format",
           [](const std::string& format) {
             log::SetFormat(format == "json" ? log::Format::kJson : log::Format::kText);
           },
           "Log lines as text (the default: `2026-11-30T19:00:00.123Z I file.cc:42] message`; "
           "tritonserver's `default` and `ISO8601` mean it too) or json (one object per line: "
           "time, level, source, message)")
        ->check(CLI::IsMember({"text", "json", "default", "ISO8601"}));
  }
  for (CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
    AddCommonFlags(sub);
  }
}

namespace {

class GroupedFormatter : public CLI::Formatter {
 public:
  explicit GroupedFormatter(std::vector<std::string> order) : order_(std::move(order)) {}

  // Formatter::make_help with our group order (make_groups is not virtual in CLI11 2.1).
  std::string make_help(const CLI::App* app, std::string name,
                        CLI::AppFormatMode mode) const override {
    if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
    return make_description(app) + make_usage(app, name) + make_positionals(app) +
           OrderedGroups(app, mode) + make_subcommands(app, mode) + "\n" + make_footer(app);
  }

 private:
  std::string OrderedGroups(const CLI::App* app, CLI::AppFormatMode mode) const {
    std::vector<std::string> groups = app->get_groups();
    auto rank = [&](const std::string& g) {
      return std::find(order_.begin(), order_.end(), g) - order_.begin();  // unlisted: first
    };
    std::stable_sort(groups.begin(), groups.end(), [&](const std::string& a, const std::string& b) {
      const bool la = rank(a) < static_cast<long>(order_.size());
      const bool lb = rank(b) < static_cast<long>(order_.size());
      if (la != lb) return lb;
      return la && rank(a) < rank(b);
    });
    std::string out;
    for (const std::string& group : groups) {
      auto opts = app->get_options([&](const CLI::Option* opt) {
        return opt->get_group() == group && opt->nonpositional() &&
               (mode != CLI::AppFormatMode::Sub || app->get_help_ptr() != opt);
      });
      if (group.empty() || opts.empty()) continue;
      out += make_group(group, false, opts);
    }
    return out;
  }

  std::vector<std::string> order_;
};

}  // namespace

void GroupFlags(CLI::App* app, const std::vector<FlagGroup>& groups) {
  std::vector<std::string> order;
  const FlagGroup* rest = nullptr;
  for (const FlagGroup& g : groups) {
    order.push_back(g.title);
    if (g.patterns.empty()) rest = &g;
  }
  for (CLI::Option* opt : app->get_options()) {
    if (opt->get_lnames().empty()) continue;
    const std::string& name = opt->get_lnames().front();
    if (name == "help" || name == "version" || name == "config") continue;
    if (opt->get_group() != "Options") {  // placed already (AcceptTritonFlags): listed last
      if (std::find(order.begin(), order.end(), opt->get_group()) == order.end()) {
        order.push_back(opt->get_group());
      }
      continue;
    }
    const FlagGroup* home = rest;
    for (const FlagGroup& g : groups) {
      auto hit = [&](const std::string& p) { return name.find(p) != std::string::npos; };
      if (std::any_of(g.patterns.begin(), g.patterns.end(), hit)) {
        home = &g;
        break;
      }
    }
    if (home != nullptr) opt->group(home->title);
  }
  app->formatter(std::make_shared<GroupedFormatter>(std::move(order)));
}

const std::vector<FlagGroup>& ServerFlagGroups() {
  static const std::vector<FlagGroup> groups = {
      {"Cluster", {"etcd", "gpus", "labels", "lease-ttl", "advertise-host", "upstream-threads"}},
      {"Models",
       {"model-", "repository-", "load-model", "strict-readiness", "exit-timeout", "log-"}},
      {"General", {}},
      {"Authentication and routing (gateway)",
       {"jwks", "jwt-", "tenant-claim", "max-tries", "retry-budget", "eject-after", "access-log"}},
      {"Load coordination", {"coordination", "lock-"}},
      {"Redis", {"redis"}},
      {"Connection limits", {"max-connections", "min-request", "max-buffered"}},
      {"TLS",
       {"ssl", "-cert", "server-key", "root-cert", "tls-handshake", "tls-max", "tls-cipher",
        "upstream-tls"}},
      {"HTTP", {"http-", "io-busy"}},
      {"gRPC", {"grpc"}},
      {"Metrics", {"metrics-port", "metrics-address"}},
      {"Features", {"feature-", "node-id"}},
      {"Vector memory", {"memory"}},
      {"Feedback and labels", {"feedback-", "label-"}},
  };
  return groups;
}

// tritonserver 2.x flags (`tritonserver --help`) with no dais equivalent. Those dais implements
// (--model-repository, --http-port, --log-verbose, ...) are its own flags.
constexpr const char* kTritonOnlyFlags[] = {"exit-on-error",
                                            "log-info",
                                            "log-warning",
                                            "log-error",
                                            "log-file",
                                            "disable-auto-complete-config",
                                            "strict-model-config",
                                            "backend-directory",
                                            "backend-config",
                                            "repoagent-directory",
                                            "pinned-memory-pool-byte-size",
                                            "cuda-memory-pool-byte-size",
                                            "cuda-virtual-address-size",
                                            "min-supported-compute-capability",
                                            "rate-limit",
                                            "rate-limit-resource",
                                            "response-cache-byte-size",
                                            "cache-config",
                                            "cache-directory",
                                            "trace-config",
                                            "trace-file",
                                            "trace-level",
                                            "trace-rate",
                                            "trace-count",
                                            "trace-log-frequency",
                                            "allow-http",
                                            "allow-metrics",
                                            "allow-gpu-metrics",
                                            "allow-cpu-metrics",
                                            "allow-sagemaker",
                                            "allow-vertex-ai",
                                            "metrics-interval-ms",
                                            "metrics-config",
                                            "buffer-manager-thread-count",
                                            "host-policy",
                                            "model-namespacing",
                                            "model-config-name",
                                            "grpc-infer-allocation-pool-size",
                                            "grpc-infer-response-compression-level",
                                            "grpc-header-forward-pattern",
                                            "http-header-forward-pattern",
                                            "reuse-http-port",
                                            "reuse-grpc-port",
                                            "http-buffer-size",
                                            "grpc-use-ssl-mutual-verify",
                                            "id",
                                            "exit-timeout-on-error",
                                            "metrics-address",
                                            "model-load-retry-count",
                                            "model-load-gpu-limit",
                                            "enable-peer-access",
                                            "sagemaker-port",
                                            "sagemaker-safe-port-range",
                                            "sagemaker-thread-count",
                                            "vertex-ai-port",
                                            "vertex-ai-thread-count",
                                            "vertex-ai-default-model",
                                            "grpc-http2-min-recv-ping-interval-without-data",
                                            "grpc-http2-max-ping-strikes",
                                            "grpc-max-connection-age",
                                            "grpc-max-connection-age-grace",
                                            "grpc-infer-thread-count",
                                            "grpc-max-response-pool-size"};

constexpr const char* kTritonGroup =
    "Accepted from tritonserver, not implemented (each warned about)";

void AcceptTritonFlags(CLI::App* app) {
  for (const char* flag : kTritonOnlyFlags) {
    const std::string name = std::string("--") + flag;
    if (app->get_option_no_throw(name) != nullptr) continue;  // this role implements it
    app->add_option(name, "tritonserver's; dais ignores it")
        ->expected(0, 1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->group(kTritonGroup);
  }
}

void WarnUnimplementedFlags(const CLI::App* app) {
  std::vector<std::string> given;
  for (const CLI::Option* opt : app->get_options()) {
    if (opt->get_group() == kTritonGroup && opt->count() > 0) given.push_back(opt->get_name());
  }
  if (given.empty()) return;
  LOG_WARNING("tritonserver flags dais does not implement were ignored: {}",
              fmt::join(given, ", "));
}

namespace {

// Replaces `ROLE ... --config FILE ...` by the file's flags (`--name=value`, one per value of an
// array) placed after ROLE, leaving out those the command line gives itself. Empty on success,
// else what was wrong.
std::string ExpandConfigFiles(CLI::App& app, std::vector<std::string>* args) {
  size_t role = 0;
  for (size_t i = 1; i < args->size(); ++i) {
    if ((*args)[i].starts_with("-")) continue;
    CLI::App* sub = FindSubcommand(app, (*args)[i]);
    // Only where AddCommonFlags added it: `dais train --config` and `dais txn --config` name
    // files of their own (training.yaml, the transactions file), not flags.
    if (sub != nullptr && FlagFileRoles().count(sub) != 0) role = i;
    break;
  }
  if (role == 0) return "";
  std::vector<std::string> files, rest;
  CLI::App* role_app = FindSubcommand(app, (*args)[role]);
  bool own = true;  // still the role's words, before one of its subcommands (`txn serve`)
  for (size_t i = role + 1; i < args->size(); ++i) {
    const std::string& a = (*args)[i];
    if (own && !a.starts_with("-") && FindSubcommand(*role_app, a) != nullptr) own = false;
    if (!own) {
      rest.push_back(a);  // a subcommand's --config (dais txn serve --config) is its own
    } else if (a == "--config" && i + 1 < args->size()) {
      files.push_back((*args)[++i]);
    } else if (a.starts_with("--config=")) {
      files.push_back(a.substr(9));
    } else {
      rest.push_back(a);
    }
  }
  if (files.empty()) return "";
  auto given = [&](const std::string& flag) {
    return std::any_of(rest.begin(), rest.end(), [&](const std::string& a) {
      return a == flag || a.starts_with(flag + "=");
    });
  };
  std::vector<std::string> from_files;
  for (const std::string& file : files) {
    std::vector<CLI::ConfigItem> items;
    try {
      items = CLI::ConfigTOML().from_file(file);
    } catch (const CLI::Error& e) {
      return fmt::format("--config {}: {}", file, e.what());
    }
    for (const CLI::ConfigItem& item : items) {
      if (item.name.empty() || item.name == "++" || item.name == "--") continue;  // sections
      std::string flag = "--" + item.name;
      std::replace(flag.begin(), flag.end(), '_', '-');  // io_busy_poll = io-busy-poll
      if (given(flag)) continue;
      if (item.inputs.empty()) from_files.push_back(flag);
      for (const std::string& v : item.inputs) from_files.push_back(flag + "=" + v);
    }
  }
  args->resize(role + 1);
  args->insert(args->end(), from_files.begin(), from_files.end());
  args->insert(args->end(), rest.begin(), rest.end());
  return "";
}

}  // namespace

int ParseCommandLine(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  if (std::string error = ExpandConfigFiles(app, &args); !error.empty()) {
    fmt::print(stderr, "{}\n", error);
    return 2;
  }
  std::vector<char*> expanded;
  for (std::string& a : args) expanded.push_back(a.data());
  try {
    app.parse(static_cast<int>(expanded.size()), expanded.data());
    // A role's --config that reached CLI11 came after one of its subcommands (expanded ones are
    // gone from the words): refused rather than silently ignored.
    for (const CLI::App* role : FlagFileRoles()) {
      if (role->get_option("--config")->count() > 0) {
        fmt::print(stderr,
                   "dais {}: --config goes before the subcommand (dais {} --config FILE ...)\n",
                   role->get_name(), role->get_name());
        return 2;
      }
    }
    return -1;
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    if (e.get_exit_code() != 0) {
      for (const std::string& hint : Hints(app, argc, argv)) fmt::print(stderr, "{}\n", hint);
    }
    return rc;
  }
}

}  // namespace dais::cmd
