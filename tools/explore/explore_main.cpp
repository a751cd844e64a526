// opfuse-explore (also run as `opfuse explore`): measured schedule exploration.
//
//   opfuse explore GRAPH [--profile P] [--budget N] [--time S] [--out DIR] [--shard i/n]
//   opfuse explore merge --graph GRAPH --out DIR SHARD_DIR...
//   opfuse explore calibrate --profile P --out profile.json EXPLORE_DIR...
//
// JIT-compiles through Halide: never load PoCL (OpenCL) in this process.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "fusion/frontend/load_model.h"
#include "fusion/hardware/profile.h"
#include "tools/explore/explore.h"
#include "tools/explore/explore_mpi.h"
#include "tools/explore/learn.h"
#include "tools/explore/measure.h"
#include "tools/graph_commands.h"

namespace fs = std::filesystem;
using namespace opfuse;

namespace {

void parse_shard(const std::string& s, explore::Options& o) {
  const auto slash = s.find('/');
  try {
    if (slash == std::string::npos) throw std::invalid_argument("");
    o.shard = std::stoi(s.substr(0, slash));
    o.shards = std::stoi(s.substr(slash + 1));
  } catch (const std::exception&) {
    throw std::invalid_argument("--shard wants i/n (e.g. 0/4), got '" + s + "'");
  }
  if (o.shards < 1 || o.shard < 0 || o.shard >= o.shards) {
    throw std::invalid_argument("--shard " + s + ": i must be in 0..n-1");
  }
}

// Draws the plots when Python's matplotlib is there (Debian's python3-matplotlib).
void plot(const std::string& out_dir) {
  const std::string script = std::string(OPFUSE_SOURCE_DIR) + "/tools/explore/plot.py";
  const std::string cmd = "/usr/bin/python3 '" + script + "' '" + out_dir + "' 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::cerr << "explore: no plots (python3 with matplotlib is needed for them)\n";
  }
}

void report(const explore::Exploration& e, const std::string& out) {
  for (const auto& l : e.log) std::printf("%s\n", l.c_str());
  std::ifstream md(out + "/summary.md");
  std::string line;
  int shown = 0;
  while (std::getline(md, line) && shown < 40) {
    std::printf("%s\n", line.c_str());
    ++shown;
  }
  std::printf(
      "wrote %s/{summary.md,candidates.csv,candidates.json,pareto.json,best_plan.json,"
      "calibration.json,profile_calibrated.json,threshold.csv}\n",
      out.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"opfuse explore: measured search around the planner's plan"};
  explore::Options o;
  std::string graph_path, out = "explore-out", shard;
  bool no_gate = false, quiet = false, mpi = false;
  app.add_option("graph", graph_path, "graph file (.json or .onnx)");
  app.add_option("--profile", o.profile, "hardware profile (built-in name or .json)");
  app.add_option("--budget", o.budget, "candidates measured at most")->check(CLI::Range(1, 100000));
  app.add_option("--time", o.time_budget_s, "wall-time budget, seconds (0: none)");
  app.add_option("--rounds", o.rounds, "rounds of neighbours")->check(CLI::Range(0, 20));
  app.add_option("--beam", o.beam, "candidates whose neighbours form the next round");
  app.add_option("--out", out, "output folder (an existing one is resumed)");
  app.add_option("--shard", shard, "measure shard i of n (i/n); merge the folders afterwards");
  app.add_option("--min-time", o.min_time_s, "timing per candidate, seconds");
  app.add_option("--seed", o.seed, "input seed");
  double p99_us = 0;
  app.add_option("--p99-bound-us", p99_us, "7.7 T_max for the chosen plan (best_plan.json)");
  app.add_option("--jitter-bound", o.jitter_bound, "7.7 jitter bound, x the unfused plan's");
  app.add_flag("--no-gate", no_gate, "measure every listed candidate (no 7.4.3 threshold gate)");
  app.add_flag("--quiet", quiet, "no progress bar");
  app.add_flag("--mpi", mpi, "ranks of an mpirun share the candidates; rank 0 merges");

  CLI::App* merge = app.add_subcommand("merge", "merge shard folders into one");
  std::vector<std::string> dirs;
  std::string merge_graph, merge_out;
  merge->add_option("dirs", dirs, "shard output folders")->required();
  merge->add_option("--graph", merge_graph, "the explored graph")->required();
  merge->add_option("--out", merge_out, "merged output folder")->required();
  merge->add_option("--profile", o.profile, "hardware profile");

  CLI::App* cal = app.add_subcommand("calibrate", "fit the correction factors over explorations");
  std::vector<std::string> cal_dirs;
  std::string cal_out = "profile_calibrated.json";
  cal->add_option("dirs", cal_dirs, "exploration output folders")->required();
  cal->add_option("--profile", o.profile, "hardware profile to calibrate");
  cal->add_option("--out", cal_out, "calibrated profile JSON");

  CLI::App* learn = app.add_subcommand(
      "learn", "7.2.4: measure the groups of explorations, train the benefit MLP, score it");
  std::vector<std::string> learn_dirs;
  std::string learn_out = "benefit_mlp.json", learn_data = "benefit_samples.csv", learn_from;
  fusion::TrainOptions train;
  learn->add_option("dirs", learn_dirs, "exploration output folders");
  learn->add_option("--out", learn_out, "trained weights (JSON)");
  learn->add_option("--data", learn_data, "training data written (CSV)");
  learn->add_option("--from-data", learn_from, "train from this CSV instead of measuring");
  learn->add_option("--profile", o.profile, "hardware profile of the analytic features");
  learn->add_option("--hidden", train.hidden, "hidden units");
  learn->add_option("--epochs", train.epochs, "training epochs");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*merge) {
      std::vector<std::string> files;
      for (const auto& d : dirs) files.push_back(d + "/results.jsonl");
      explore::Exploration e;
      const graph::Graph g = fusion::load_model(merge_graph);
      e.graph = g.name;
      e.results = explore::merge_results(files);
      e.log.push_back("merged " + std::to_string(e.results.size()) + " candidates from " +
                      std::to_string(dirs.size()) + " folders");
      fs::create_directories(merge_out);
      std::ofstream res(merge_out + "/results.jsonl");
      for (const auto& r : e.results) res << explore::result_to_json_line(r) << "\n";
      res.close();
      explore::write_outputs(g, o, e, merge_out);
      report(e, merge_out);
      plot(merge_out);
      return 0;
    }
    if (*cal) {
      std::vector<explore::Result> all;
      std::printf("%-28s %8s %10s %10s %10s %10s\n", "exploration", "samples", "MdAPE", "MdAPE cal",
                  "Spearman", "Spearman cal");
      std::vector<std::vector<explore::Result>> per;
      for (const auto& d : cal_dirs) {
        per.push_back(explore::merge_results({d + "/results.jsonl"}));
        all.insert(all.end(), per.back().begin(), per.back().end());
      }
      const explore::Correction c = explore::fit_correction(all);
      for (size_t i = 0; i < cal_dirs.size(); ++i) {
        const explore::ModelError err = explore::model_error(per[i], c);
        std::printf("%-28s %8d %9.1f%% %9.1f%% %10.3f %10.3f\n",
                    fs::path(cal_dirs[i]).filename().c_str(), err.samples, 100 * err.mdape_before,
                    100 * err.mdape_after, err.spearman_before, err.spearman_after);
      }
      std::ofstream(cal_out) << fusion::profile_to_json(
          explore::calibrated_profile(fusion::load_profile(o.profile), c));
      std::printf("a_cache %.3f, a_conflict %.3f over %d samples -> %s\n", c.alpha_cache,
                  c.alpha_conflict, c.samples, cal_out.c_str());
      return 0;
    }
    if (*learn) {
      std::vector<explore::GroupSample> samples;
      if (!learn_from.empty()) {
        samples = explore::read_samples_csv(learn_from);
      } else {
        if (learn_dirs.empty()) throw std::invalid_argument("learn: exploration folders needed");
        o.min_time_s = 0.05;
        samples = explore::collect_group_samples(learn_dirs, o);
        explore::write_samples_csv(samples, learn_data);
        std::printf("%zu group samples -> %s\n", samples.size(), learn_data.c_str());
      }
      fusion::Mlp mlp;
      const explore::LearnReport r = explore::train_and_score(samples, train, mlp);
      std::ofstream(learn_out) << fusion::mlp_to_json(mlp);
      std::printf(
          "trained on %d groups, scored on %d held out (benefit ratio R = T_unfused / "
          "T_fused):\n",
          r.train, r.held_out);
      std::printf("  %-10s median |error| %6.1f%%  Spearman %6.3f\n", "learned",
                  100 * r.learned_mdape, r.learned_spearman);
      std::printf("  %-10s median |error| %6.1f%%  Spearman %6.3f\n", "analytic",
                  100 * r.analytic_mdape, r.analytic_spearman);
      std::printf("weights -> %s (use: opfuse plan --cost-model learned:%s)\n", learn_out.c_str(),
                  learn_out.c_str());
      return 0;
    }
    if (graph_path.empty()) throw std::invalid_argument("a graph file is needed");
    if (!shard.empty()) parse_shard(shard, o);
    o.gate = !no_gate;
    o.p99_bound_s = p99_us * 1e-6;
    o.progress = !quiet;
    const graph::Graph g = fusion::load_model(graph_path);
    o.graph_path = fs::absolute(graph_path).string();
    if (mpi) return explore::run_mpi(g, o, out, argc, argv);
    const fusion::RooflineCostModel model(fusion::load_profile(o.profile));
    const explore::Exploration e = explore::explore(g, o, out, explore::jit_measure(g, model, o));
    explore::write_outputs(g, o, e, out);
    report(e, out);
    plot(out);
  } catch (const std::exception& e) {
    std::cerr << "opfuse explore: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
