#include "cmd/train.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <stdio.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cmd/publish_version.h"
#include "learn/join.h"
#include "learn/training_spec.h"
#include "learn/xgb_train.h"
#ifdef DAIS_HAVE_LEARN_TORCH
#include "learn/torch_train.h"
#endif

namespace dais::cmd {
namespace {

namespace fs = std::filesystem;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Progress(const std::string& line) { fmt::print(stderr, "dais train: {}\n", line); }

// The newest numbered version of the model with an XGBoost file or a TorchScript model.pt, and
// that file's name.
bool ServingVersion(const learn::TrainingSpec& spec, int64_t* version, std::string* file) {
  *version = NewestVersion(fs::path(spec.repository) / spec.model, file);
  return *version > 0;
}

std::string ScoresJson(const learn::Scores& s) {
  auto num = [](double v) {
    return std::isnan(v) ? std::string("null") : fmt::format("{:.6f}", v);
  };
  return fmt::format(R"({{"auc": {}, "logloss": {}, "accuracy": {}, "rows": {}}})", num(s.auc),
                     num(s.logloss), num(s.accuracy), s.rows);
}

std::string MetricsJson(const learn::TrainingSpec& spec, int64_t base, const learn::Dataset& all,
                        const learn::Dataset& train, int64_t holdout_from, int64_t cutoff,
                        const learn::JoinStats& st, const learn::TrainResult& r, double improvement,
                        bool published) {
  return fmt::format(
      "{{\n  \"model\": \"{}\",\n  \"base_version\": {},\n  \"metric\": \"{}\",\n"
      "  \"min_improvement\": {},\n  \"improvement\": {:.6f},\n  \"published\": {},\n"
      "  \"candidate\": {},\n  \"serving\": {},\n  \"rounds\": {},\n  \"continued\": {},\n"
      "  \"data\": {{\"first_prediction_ms\": {}, \"last_prediction_ms\": {}, \"holdout_from_ms\": "
      "{}, \"cutoff_ms\": {}, \"train_rows\": {}, \"holdout_rows\": {}}},\n"
      "  \"join\": {{\"predictions\": {}, \"labels\": {}, \"labels_after_cutoff\": {}, "
      "\"labels_unmatched\": {}, \"labeled\": {}, \"defaulted\": {}, \"left_out\": {}, "
      "\"unusable\": {}, \"duplicates\": {}}}\n}}\n",
      spec.model, base, spec.metric, spec.min_improvement, improvement,
      published ? "true" : "false", ScoresJson(r.candidate), ScoresJson(r.serving), r.rounds,
      spec.continue_training ? "true" : "false", all.time_ms.front(), all.time_ms.back(),
      holdout_from, cutoff, train.rows(), r.candidate.rows, st.predictions, st.labels,
      st.labels_late, st.labels_unmatched, st.labeled, st.defaulted, st.left_out, st.unusable,
      st.duplicates);
}

void PrintComparison(const learn::TrainingSpec& spec, int64_t base, const learn::TrainResult& r) {
  auto cell = [](double v) { return std::isnan(v) ? std::string("-") : fmt::format("{:.4f}", v); };
  fmt::print("{:<22} {:>8} {:>8} {:>8} {:>8}\n", "held-out rows", "AUC", "logloss", "accuracy",
             "rows");
  fmt::print("{:<22} {:>8} {:>8} {:>8} {:>8}\n", fmt::format("serving (version {})", base),
             cell(r.serving.auc), cell(r.serving.logloss), cell(r.serving.accuracy),
             r.serving.rows);
  fmt::print("{:<22} {:>8} {:>8} {:>8} {:>8}\n", "candidate", cell(r.candidate.auc),
             cell(r.candidate.logloss), cell(r.candidate.accuracy), r.candidate.rows);
  (void)spec;
}

// Where the held-out rows begin: the newest `holdout` before the cut-off, or for a share, the
// time of the first row of the newest share (rows are in time order).
int64_t HoldoutFrom(const learn::TrainingSpec& spec, const learn::Dataset& all, int64_t cutoff) {
  if (spec.holdout_fraction <= 0 || all.rows() == 0) return cutoff - spec.holdout_ms;
  const auto first =
      static_cast<size_t>(static_cast<double>(all.rows()) * (1 - spec.holdout_fraction));
  return all.time_ms[std::min(all.rows() - 1, first)];
}

// Moves the candidate in `tmp` (with its metrics.json) to `target`. False (and said why) when
// it cannot.
bool Publish(const fs::path& tmp, const std::string& file, const std::string& metrics,
             const fs::path& target) {
  Status s = WriteSynced(tmp / "metrics.json", metrics)
                 ? PublishFolder(tmp, file, target)
                 : Internal("cannot write " + (tmp / "metrics.json").string());
  if (!s.ok()) {
    fmt::print(stderr, "dais train: {}{}\n", s.message(),
               s.code() == StatusCode::kAlreadyExists ? " (nothing published)" : "");
  }
  return s.ok();
}

// XGBoost, or LibTorch for a TorchScript model.pt.
StatusOr<learn::TrainResult> Train(const learn::TrainingSpec& spec, const learn::Dataset& train,
                                   const learn::Dataset& holdout, const std::string& serving,
                                   const std::string& candidate, const std::string& file) {
  if (file != "model.pt") {
    return learn::TrainAndScore(spec, train, holdout, serving, candidate, Progress);
  }
#ifdef DAIS_HAVE_LEARN_TORCH
  return learn::TrainTorchAndScore(spec, train, holdout, serving, candidate, Progress);
#else
  return Unimplemented("model: " + serving + " is TorchScript; this build has no LibTorch");
#endif
}

// --result-file's JSON (nothing without the flag).
void WriteResult(const std::string& path, bool published, int64_t version,
                 const std::string& metric, double candidate, double serving, double improvement) {
  if (path.empty()) return;
  std::ofstream(path) << fmt::format(
      R"({{"published": {}, "version": {}, "metric": "{}", "candidate": {:.6f}, )"
      R"("serving": {:.6f}, "improvement": {:.6f}}})"
      "\n",
      published ? "true" : "false", version, metric, candidate, serving, improvement);
}

}  // namespace

CLI::App* AddTrainCommand(CLI::App* app, TrainCliOptions* o) {
  CLI::App* cmd = app->add_subcommand(
      "train",
      "Join archived feedback with the labels that arrived after each prediction (never after "
      "the cut-off), train an XGBoost candidate, score it and the serving version on the same "
      "held-out rows, and publish it as the model's next version only when it is better by the "
      "spec's margin (docs/learning-loop.md). Exit 0: published; 3: not better, nothing "
      "published; 2: a bad training.yaml; 1: other errors.");
  cmd->add_option("--config", o->config, "The training.yaml (fields: docs/learning-loop.md).")
      ->required();
  cmd->add_option("--cutoff-ms", o->cutoff_ms,
                  "The training cut-off, ms since the epoch: labels received later and "
                  "predictions made later do not exist for this run (default: now).");
  cmd->add_flag("--dry-run", o->dry_run, "Train and compare; publish nothing.");
  cmd->add_option("--result-file", o->result_file,
                  "Also write the outcome as JSON here (exit 0 or 3): published, version, "
                  "metric and the two scores.");
  return cmd;
}

int RunTrain(const TrainCliOptions& o) {
  auto spec = learn::LoadTrainingSpec(o.config);
  if (!spec.ok()) {
    fmt::print(stderr, "dais train: {}\n", spec.status().message());
    return 2;
  }
  int64_t base = 0;
  std::string file;
  if (!ServingVersion(*spec, &base, &file)) {
    fmt::print(stderr,
               "dais train: {}: model: no version of '{}' with an XGBoost model or a TorchScript "
               "model.pt in {}\n",
               o.config, spec->model, spec->repository);
    return 2;
  }
  const int64_t cutoff = o.cutoff_ms > 0 ? o.cutoff_ms : NowMs();
  const auto start = std::chrono::steady_clock::now();
  learn::JoinStats st;
  auto all = learn::JoinFeedbackAndLabels(*spec, cutoff, &st, Progress);
  if (!all.ok()) {
    fmt::print(stderr, "dais train: {}\n", all.status().message());
    return 1;
  }
  Progress(
      fmt::format("joined {} predictions: {} labelled, {} unlabelled after their window{}, "
                  "{} left out; {} labels matched nothing, {} unusable records ({:.1f} s)",
                  st.predictions, st.labeled, st.defaulted,
                  spec->has_unlabeled ? fmt::format(" (-> {})", spec->unlabeled) : "", st.left_out,
                  st.labels_unmatched, st.unusable,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
  const int64_t holdout_from = HoldoutFrom(*spec, *all, cutoff);
  const learn::Dataset train = learn::Slice(*all, 0, holdout_from);
  const learn::Dataset holdout = learn::Slice(*all, holdout_from, cutoff);
  if (train.rows() == 0 || holdout.rows() == 0) {
    fmt::print(stderr,
               "dais train: {}: holdout: the window splits {} rows into {} to train on and {} "
               "held out; both need rows (nothing published)\n",
               o.config, all->rows(), train.rows(), holdout.rows());
    return 1;
  }
  const fs::path model_dir = fs::path(spec->repository) / spec->model;
  const fs::path tmp = model_dir / fmt::format(".train-{}", ::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(p, e);
    }
  } cleanup{tmp};
  const std::string serving_path = (model_dir / std::to_string(base) / file).string();
  auto r = Train(*spec, train, holdout, serving_path, (tmp / file).string(), file);
  if (!r.ok()) {
    fmt::print(stderr, "dais train: {}\n", r.status().message());
    return 1;
  }
  PrintComparison(*spec, base, *r);
  const double cand = learn::MetricOf(r->candidate, spec->metric);
  const double serv = learn::MetricOf(r->serving, spec->metric);
  const double improvement = learn::HigherIsBetter(spec->metric) ? cand - serv : serv - cand;
  if (std::isnan(improvement)) {
    fmt::print(stderr,
               "dais train: the held-out rows hold one class only: {} cannot compare the "
               "versions (nothing published)\n",
               spec->metric);
    return 1;
  }
  // Strictly better: a candidate that only ties the serving version is not published.
  const bool better = improvement > spec->min_improvement ||
                      (spec->min_improvement > 0 && improvement == spec->min_improvement);
  const bool publish = better && !o.dry_run;
  const std::string metrics =
      MetricsJson(*spec, base, *all, train, holdout_from, cutoff, st, *r, improvement, publish);
  auto result = [&](bool published, int64_t version) {
    WriteResult(o.result_file, published, version, spec->metric, cand, serv, improvement);
  };
  if (!better) {
    result(false, base);
    fmt::print(
        "not published: the candidate's {} is {:.4f}, the serving version's {:.4f}: "
        "{:+.4f}, the spec asks for at least {:+.4f}\n",
        spec->metric, cand, serv, improvement, spec->min_improvement);
    return 3;
  }
  if (o.dry_run) {
    result(false, base);
    fmt::print("better by {:+.4f} {} (--dry-run: nothing published)\n", improvement, spec->metric);
    return 0;
  }
  const fs::path target = model_dir / std::to_string(base + 1);
  if (!Publish(tmp, file, metrics, target)) return 1;
  result(true, base + 1);
  fmt::print("published {} version {} (better by {:+.4f} {}): {}\n", spec->model, base + 1,
             improvement, spec->metric, target.string());
  return 0;
}

}  // namespace dais::cmd
