// Zero-shot multiple-choice tasks in lm-eval-harness 0.4's conventions (docs/evaluation.md): the
// readers of the tasks' JSONL files, each line one example made into (context, continuation)
// requests as the harness's task yamls make them.
//
//   std::vector<McExample> piqa = read_task("piqa", "piqa.jsonl", 100);   // the first 100 lines
//   for (const McExample& ex : piqa) score(ex.requests, ex.gold);
//
// A request's continuation starts with the target delimiter " ". The harness's choice strings
// (the texts whose lengths acc_norm and acc_bytes divide by) are kept in `choice_texts`: the
// choices without the delimiter, or for WinoGrande's partial scoring the filled-in contexts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cotan::eval {

struct McRequest {
  std::string context;       // what the choice is conditioned on
  std::string continuation;  // what is scored, " " + the choice (WinoGrande: " " + the suffix)
};

struct McExample {
  std::vector<McRequest> requests;        // one per choice, in the file's order
  std::vector<std::string> choice_texts;  // per choice: the string acc_norm/acc_bytes measure
  int64_t gold = 0;                       // index of the right choice
  int64_t line = 0;                       // the example's line in its file (1-based)
};

// "piqa", "hellaswag", "winogrande", "arc_easy", "arc_challenge", "boolq".
const std::vector<std::string>& task_names();
bool is_task(std::string_view name);
// Throws "[eval] unknown task 'NAME' (known: winogrande, piqa, ...)" unless is_task(name).
void require_task(std::string_view name);

// A task list, "piqa=a.jsonl,boolq=b.jsonl", as (name, file) pairs in Table 1's column order
// (task_names()), each task once; empty items are skipped. Errors name the command and the
// option: "[distill] --eval-tasks: 'piqa' is not NAME=FILE", "... unknown task 'squad' (known:
// ...)", "... piqa is given twice".
std::vector<std::pair<std::string, std::string>> parse_task_list(const std::string& spec, const std::string& command,
                                                                 const std::string& option);

// The examples of the first `limit` non-blank lines of `path` (limit 0: all), read as task `name`.
// Errors, one line each naming the file and line ("[eval] piqa.jsonl:3: missing field 'sol2'"):
// an unknown task name, a file that cannot be read or holds no examples, a line that is not a
// JSON object, a missing or mistyped field, an empty choice list (HellaSwag's endings, ARC's
// choices), choices.text and choices.label of different lengths, a label out of range (or an
// ARC answerKey that is none of the labels, a WinoGrande answer other than "1"/"2"), a
// WinoGrande sentence without "_".
std::vector<McExample> read_task(const std::string& name, const std::string& path, int64_t limit = 0);

// The harness's HellaSwag preprocess: strip, " [title]" -> ". ", drop each "[...]" (the shortest
// bracketed run within a line), "  " -> " " (one pass, as Python's str.replace).
std::string hellaswag_preprocess(std::string_view text);
// Python's str.capitalize for the first character's case (ASCII upper-cased; the rest lower-cased).
std::string capitalize(std::string_view text);
// Python's len(str): the number of code points of valid UTF-8.
int64_t code_points(std::string_view text);

}  // namespace cotan::eval
