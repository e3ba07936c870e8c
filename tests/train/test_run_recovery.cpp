// What a run directory holds after faults and hand edits: nothing lost, nothing stale, nothing
// silent. A resumed run maps no checkpoint file, so a pruned one frees its space; checkpoint-<step>
// directories the run did not write are reported and left alone; an empty validation split
// reports no loss; a run stopped before its first checkpoint starts over in place; a refused
// start leaves no lock file.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support.hpp"
#include "tests/train/trainer_fixtures.hpp"
#include "train/run_dir.hpp"
#include "train/trainer.hpp"

using namespace cotan;
using namespace cotan::train;
using namespace cotan::train::testing;
namespace fs = std::filesystem;

namespace {

// What f writes to std::cerr.
std::string cerr_of(const std::function<void()>& f) {
  std::ostringstream captured;
  std::streambuf* saved = std::cerr.rdbuf(captured.rdbuf());
  try {
    f();
  } catch (...) {
    std::cerr.rdbuf(saved);
    throw;
  }
  std::cerr.rdbuf(saved);
  return captured.str();
}

// Every entry under dir, with the bytes of the files.
std::map<std::string, std::string> tree_of(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    std::string& bytes = out[fs::relative(e.path(), dir).string()];
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    bytes = text.str();
  }
  return out;
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// The lines of /proc/self/maps that map a deleted file under dir: disk space this process holds.
std::vector<std::string> deleted_mappings(const std::string& dir) {
  std::ifstream maps("/proc/self/maps");
  std::vector<std::string> out;
  for (std::string line; std::getline(maps, line);)
    if (line.find(dir + "/") != std::string::npos && line.ends_with("(deleted)")) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("a resumed run maps no checkpoint file: pruning the one it resumed from frees its space") {
  SmallRun r;
  TrainConfig c = config("cotan_train_unmapped", 6);
  c.stop_after = 2;
  c.checkpoint_every = 1;
  c.keep_checkpoints = 1;
  r.run(c, false);
  TrainConfig rest = config("cotan_train_unmapped", 6, true);
  rest.checkpoint_every = 1;
  rest.keep_checkpoints = 1;
  const TrainResult resumed = r.run(rest, true);  // alive: its parameters, and what they hold
  CHECK(resumed.start_step == 2);
  CHECK(names_in(rest.run_dir) == std::vector<std::string>{"checkpoint", "metrics.jsonl"});
  CHECK(deleted_mappings(fs::canonical(rest.run_dir).string()) == std::vector<std::string>{});
  fs::remove_all(rest.run_dir);
}

TEST_CASE("checkpoint-<step> directories the run did not write are reported, never resumed from nor pruned") {
  SmallRun r;
  TrainConfig whole = config("cotan_train_copies_whole", 6);
  r.run(whole, false);
  TrainConfig c = config("cotan_train_copies", 6);
  c.stop_after = 3;
  c.checkpoint_every = 1;  // keep_checkpoints 2: checkpoint/ and checkpoint-2/
  r.run(c, false);
  const fs::path dir = c.run_dir;
  // A backup made by hand under a later step's name, and a directory of notes under another.
  fs::copy(dir / "checkpoint", dir / "checkpoint-999", fs::copy_options::recursive);
  fs::create_directories(dir / "checkpoint-7");
  std::ofstream(dir / "checkpoint-7" / "notes.txt") << "mine\n";
  const auto backup = tree_of(dir / "checkpoint-999"), notes = tree_of(dir / "checkpoint-7");

  TrainConfig rest = config("cotan_train_copies", 6, true);
  rest.checkpoint_every = 1;
  const std::string said = cerr_of([&] { r.run(rest, true); });
  CHECK(said.find("note: " + (dir / "checkpoint-7").string() +
                  " is not a checkpoint this run wrote (it has no trainer.json): it is left alone, never resumed from "
                  "nor removed\n") != std::string::npos);
  CHECK(said.find("note: " + (dir / "checkpoint-999").string() +
                  " is not a checkpoint this run wrote (its trainer.json records step 3): it is left alone, never "
                  "resumed from nor removed\n") != std::string::npos);
  CHECK(deterministic_metrics(rest.run_dir) == deterministic_metrics(whole.run_dir));
  // The run's own previous checkpoint is kept, and the others are as they were.
  CHECK(names_in(dir) == std::vector<std::string>{"checkpoint", "checkpoint-5", "checkpoint-7", "checkpoint-999",
                                                  "metrics.jsonl"});
  CHECK(tree_of(dir / "checkpoint-999") == backup);
  CHECK(tree_of(dir / "checkpoint-7") == notes);
  // Without checkpoint/, a resume falls back to the run's checkpoint-5, not to the copy.
  fs::remove_all(dir / "checkpoint");
  TrainConfig longer = config("cotan_train_copies", 6, true);
  cerr_of([&] { CHECK(r.run(longer, true).start_step == 5); });
  fs::remove_all(dir);
  fs::remove_all(whole.run_dir);
}

TEST_CASE("without validation batches the run reports no validation loss, never a loss of 0") {
  SmallRun r;
  r.data.val = TokenSequence();  // a corpus of one document: all of it trains
  TrainConfig c = config("cotan_train_no_val", 4);
  TrainResult result;
  const std::string said = cerr_of([&] { result = r.run(c, false); });
  CHECK(said ==
        "note: no validation batches (the validation split holds 0 tokens; a window takes seq_len + 1 = 17): the run "
        "reports no validation loss\n");
  CHECK(result.evals.empty());
  CHECK(read_metrics(c.run_dir).evals.empty());
  std::ifstream in(fs::path(c.run_dir) / "metrics.jsonl");
  const std::string metrics((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(metrics.find("\"eval\"") == std::string::npos);
  CHECK(std::count(metrics.begin(), metrics.end(), '\n') == 4);
  // evaluate() itself refuses to average nothing.
  CHECK(error_of([&] { evaluate(r.model, result.params, result.state, Teacher{}, {}, c.loss); }) ==
        "[eval] no validation batches: nothing to evaluate (a loss of 0 would be a lie)");
  fs::remove_all(c.run_dir);
}

TEST_CASE("a run stopped before its first checkpoint starts over in place, by --resume or by a new run") {
  SmallRun r;
  TrainConfig c = config("cotan_train_no_checkpoint", 4);
  r.run(c, false);
  const std::string whole = deterministic_metrics(c.run_dir);
  const fs::path dir = c.run_dir;
  // What a run killed before its first checkpoint leaves: the metrics of its first steps, a
  // cut-short checkpoint write and its lock file.
  auto killed = [&] {
    fs::remove_all(dir / "checkpoint");
    fs::create_directories(dir / "checkpoint.tmp");
    std::ofstream(dir / "checkpoint.tmp" / "model.safetensors") << "partial";
    std::ofstream(dir / ".lock") << "999999\ncotan pretrain\n";
  };
  const std::string message = "starting over in " + c.run_dir +
                              ": the run there stopped before its first checkpoint (removing checkpoint.tmp/, "
                              "metrics.jsonl)\n";
  TrainConfig again = config("cotan_train_no_checkpoint", 4, true);
  killed();
  std::string said = cerr_of([&] { CHECK(r.run(again, true).start_step == 0); });
  CHECK(said == message);
  CHECK(deterministic_metrics(c.run_dir) == whole);
  killed();
  said = cerr_of([&] { r.run(again, false); });
  CHECK(said == message);
  CHECK(deterministic_metrics(c.run_dir) == whole);
  CHECK(names_in(dir) == std::vector<std::string>{"checkpoint", "metrics.jsonl"});
  // A directory without any run's traces has nothing to resume, and is left as it was.
  fs::remove_all(dir);
  fs::create_directories(dir);
  CHECK(error_of([&] { r.run(again, true); }) ==
        "[resume] " + c.run_dir + "/checkpoint: no checkpoint to resume from");
  CHECK(names_in(dir).empty());
  fs::remove_all(dir);
}

TEST_CASE("a refused start leaves no lock file; a lock that made its directory removes it if nothing was written") {
  SmallRun r;
  TrainConfig c = config("cotan_train_user_dir", 2);
  const fs::path dir = c.run_dir;
  fs::create_directories(dir);
  std::ofstream(dir / "notes.txt") << "mine\n";
  CHECK(error_of([&] { r.run(c, false); }) ==
        "[train] " + c.run_dir + " already holds files (notes.txt): pass --overwrite to move them aside, or choose "
                                 "another --run-dir");
  CHECK(names_in(dir) == std::vector<std::string>{"notes.txt"});
  fs::remove_all(dir);
  {
    const RunDirLock lock(c.run_dir, "train");
    CHECK(names_in(dir) == std::vector<std::string>{kLockFileName});
  }
  CHECK_FALSE(fs::exists(dir));
  // A finished run keeps what it wrote, without the lock file.
  r.run(c, false);
  CHECK(names_in(dir) == std::vector<std::string>{"checkpoint", "metrics.jsonl"});
  fs::remove_all(dir);
}

TEST_CASE("moving a run aside: '.', '..' and trailing slashes name the directory itself; a failed move undoes itself") {
  CHECK(run_dir_name("runs/a/") == "runs/a");
  CHECK(run_dir_name("runs/./a") == "runs/a");
  CHECK(run_dir_name(".") == fs::current_path().string());
  CHECK(run_dir_name("..") == fs::current_path().parent_path().string());
  CHECK(run_dir_name("/") == "/");
  CHECK(error_of([] { move_run_aside("/", "train"); }) ==
        "[train] cannot move / aside: it has no parent directory to hold /.old-1");
  const fs::path dir = fs::temp_directory_path() / "cotan_train_aside";
  fs::remove_all(dir);
  fs::remove_all(dir.string() + ".old-1");
  fs::create_directories(dir / "sub");
  std::ofstream(dir / "a.txt") << "a\n";
  std::ofstream(dir / "sub" / "b.txt") << "b\n";
  const auto before = tree_of(dir);
  const fs::path saved = fs::current_path();
  fs::current_path(dir);
  std::string aside;
  CHECK_NOTHROW(aside = move_run_aside(".", "train"));
  fs::current_path(saved);
  CHECK(aside == dir.string() + ".old-1");
  CHECK(tree_of(aside) == before);
  CHECK(names_in(dir).empty());
  fs::remove_all(dir);
  fs::remove_all(aside);
}
