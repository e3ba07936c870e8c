#include "eval/tasks.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <functional>
#include <map>

#include "text/unicode.hpp"
#include "util/error.hpp"
#include "util/json.hpp"

namespace cotan::eval {

namespace {

constexpr std::string_view kDelimiter = " ";  // the harness's default target_delimiter

// Python's str.strip(): the White_Space characters (and U+001C..U+001F, which Python also strips)
// at both ends of valid UTF-8.
bool is_python_space(char32_t c) { return (c >= 0x1C && c <= 0x1F) || text::is_whitespace(c); }

std::string strip(std::string_view s) {
  size_t begin = 0, end = s.size();
  while (begin < end) {
    int n = 0;
    if (!is_python_space(text::utf8_at(s, begin, &n))) break;
    begin += size_t(n);
  }
  while (end > begin) {
    const size_t last = begin + text::utf8_last_start(s.substr(begin, end - begin));
    int n = 0;
    if (!is_python_space(text::utf8_at(s, last, &n))) break;
    end = last;
  }
  return std::string(s.substr(begin, end - begin));
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = s.find(from, at)) != std::string_view::npos; at = hit + from.size())
    out.append(s.substr(at, hit - at)).append(to);
  return out.append(s.substr(at));
}

// One example of a task, from the fields of its line; errors go through f.error (file:line).
using Reader = std::function<McExample(const JsonFields& f)>;

// Choices placed in the continuation, after a shared context (every task but WinoGrande).
McExample shared_context(const std::string& context, const std::vector<std::string>& choices, int64_t gold,
                         const JsonFields& f, std::string_view label_field) {
  if (choices.empty()) f.error("the choice list is empty");
  if (gold < 0 || gold >= int64_t(choices.size()))
    f.error("label ", gold, " (field '", label_field, "') is out of range for ", choices.size(), " choices");
  McExample ex;
  for (const std::string& choice : choices) {
    ex.requests.push_back({context, cat(kDelimiter, choice)});
    ex.choice_texts.push_back(choice);
  }
  ex.gold = gold;
  return ex;
}

std::vector<std::string> string_list(const JsonFields& f, std::string_view key) {
  const Json* v = f.find(key);
  if (!v) f.error("missing field '", f.name(key), "'");
  if (!v->is_array()) f.error("field '", f.name(key), "' must be an array of strings, got ", kind_name(*v));
  std::vector<std::string> out;
  for (const Json& item : *v) {
    if (!item.is_string()) f.error("field '", f.name(key), "' must hold strings, got ", kind_name(item));
    out.push_back(item.get<std::string>());
  }
  return out;
}

// An integer label, or a string of one (HellaSwag's "label" is "0".."3").
int64_t integer_label(const JsonFields& f, std::string_view key) {
  const Json* v = f.find(key);
  if (!v) f.error("missing field '", key, "'");
  if (v->is_number_integer()) return as_int(*v);
  if (v->is_string()) {
    const std::string& s = v->get_ref<const std::string&>();
    if (!s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return std::stoll(s);
    f.error("field '", key, "' must be an integer, got \"", s, "\"");
  }
  f.error("field '", key, "' must be an integer, got ", kind_name(*v));
}

McExample read_piqa(const JsonFields& f) {
  const std::string context = cat("Question: ", f.required<std::string>("goal"), "\nAnswer:");
  return shared_context(context, {f.required<std::string>("sol1"), f.required<std::string>("sol2")},
                        integer_label(f, "label"), f, "label");
}

McExample read_hellaswag(const JsonFields& f) {
  const std::string ctx = cat(f.required<std::string>("ctx_a"), " ", capitalize(f.required<std::string>("ctx_b")));
  const std::string query = hellaswag_preprocess(cat(f.required<std::string>("activity_label"), ": ", ctx));
  std::vector<std::string> endings = string_list(f, "endings");
  for (std::string& e : endings) e = hellaswag_preprocess(e);
  return shared_context(query, endings, integer_label(f, "label"), f, "label");
}

// Partial scoring: each option fills the blank of the context; the suffix after the blank is the
// one continuation, scored given each filled context.
McExample read_winogrande(const JsonFields& f) {
  const std::string sentence = f.required<std::string>("sentence");
  const std::string options[] = {f.required<std::string>("option1"), f.required<std::string>("option2")};
  const std::string answer = f.required<std::string>("answer");
  if (answer != "1" && answer != "2") f.error("answer \"", answer, "\" is out of range (\"1\" or \"2\")");
  const size_t blank = sentence.find('_');
  if (blank == std::string::npos) f.error("the sentence has no blank \"_\"");
  const std::string suffix = cat(kDelimiter, strip(std::string_view(sentence).substr(blank + 1)));
  McExample ex;
  for (const std::string& option : options) {
    ex.requests.push_back({sentence.substr(0, blank) + option, suffix});
    ex.choice_texts.push_back(sentence.substr(0, blank) + option);
  }
  ex.gold = answer == "1" ? 0 : 1;
  return ex;
}

McExample read_arc(const JsonFields& f) {
  const std::string context = cat("Question: ", f.required<std::string>("question"), "\nAnswer:");
  const std::optional<JsonFields> choices = f.object("choices");
  if (!choices) f.error("missing field 'choices'");
  const std::vector<std::string> text = string_list(*choices, "text");
  const std::vector<std::string> labels = string_list(*choices, "label");
  if (text.size() != labels.size())
    f.error("choices.text has ", text.size(), " entries but choices.label ", labels.size());
  if (text.empty()) f.error("the choice list is empty");
  const std::string key = f.required<std::string>("answerKey");
  const auto at = std::find(labels.begin(), labels.end(), key);
  if (at == labels.end()) f.error("answerKey \"", key, "\" is out of range: none of choices.label");
  return shared_context(context, text, int64_t(at - labels.begin()), f, "answerKey");
}

McExample read_boolq(const JsonFields& f) {
  const std::string context =
      cat(f.required<std::string>("passage"), "\nQuestion: ", f.required<std::string>("question"), "?\nAnswer:");
  return shared_context(context, {"no", "yes"}, f.required<bool>("answer") ? 1 : 0, f, "answer");
}

const std::map<std::string, Reader, std::less<>>& readers() {
  static const std::map<std::string, Reader, std::less<>> all = {
      {"piqa", read_piqa},         {"hellaswag", read_hellaswag}, {"winogrande", read_winogrande},
      {"arc_easy", read_arc},      {"arc_challenge", read_arc},   {"boolq", read_boolq}};
  return all;
}

}  // namespace

const std::vector<std::string>& task_names() {
  static const std::vector<std::string> names = {"winogrande", "piqa",     "hellaswag",
                                                 "arc_challenge", "arc_easy", "boolq"};
  return names;
}

bool is_task(std::string_view name) { return readers().count(name) > 0; }

namespace {

std::string known_tasks() {
  std::string known;
  for (const std::string& n : task_names()) known += (known.empty() ? "" : ", ") + n;
  return known;
}

}  // namespace

void require_task(std::string_view name) {
  if (!is_task(name)) fail("eval", "unknown task '", name, "' (known: ", known_tasks(), ")");
}

std::vector<std::pair<std::string, std::string>> parse_task_list(const std::string& spec, const std::string& command,
                                                                 const std::string& option) {
  std::map<std::string, std::string> given;
  size_t begin = 0;
  while (begin <= spec.size()) {
    const size_t end = std::min(spec.find(',', begin), spec.size());
    const std::string item = spec.substr(begin, end - begin);
    begin = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      fail(command, option, ": '", item, "' is not NAME=FILE");
    const std::string name = item.substr(0, eq);
    if (!is_task(name)) fail(command, option, ": unknown task '", name, "' (known: ", known_tasks(), ")");
    if (!given.emplace(name, item.substr(eq + 1)).second) fail(command, option, ": ", name, " is given twice");
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& name : task_names())
    if (const auto it = given.find(name); it != given.end()) out.emplace_back(name, it->second);
  return out;
}

std::vector<McExample> read_task(const std::string& name, const std::string& path, int64_t limit) {
  require_task(name);
  const auto reader = readers().find(name);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("eval", name, " file ", path, ": cannot open");
  std::vector<McExample> out;
  int64_t line_no = 0;
  for (std::string line; (limit == 0 || int64_t(out.size()) < limit) && std::getline(in, line);) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = cat(path, ":", line_no);
    Json json;
    try {
      json = parse_json(line);
    } catch (const std::exception& e) {
      fail("eval", where, ": not valid JSON (", e.what(), ")");
    }
    const JsonFields fields(json, "eval", where);
    McExample ex = reader->second(fields);
    ex.line = line_no;
    out.push_back(std::move(ex));
  }
  if (in.bad()) fail("eval", name, " file ", path, ": read error");
  if (out.empty()) fail("eval", name, " file ", path, ": no examples");
  return out;
}

std::string hellaswag_preprocess(std::string_view text) {
  std::string s = replace_all(strip(text), " [title]", ". ");
  std::string dropped;
  for (size_t i = 0; i < s.size();) {
    const size_t close = s[i] == '[' ? s.find_first_of("]\n", i + 1) : std::string::npos;
    if (close != std::string::npos && s[close] == ']') {
      i = close + 1;  // "[...]" with no newline inside: Python's "." does not match "\n"
      continue;
    }
    dropped += s[i++];
  }
  return replace_all(dropped, "  ", " ");
}

std::string capitalize(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    int n = 0;
    const char32_t c = text::utf8_at(text, i, &n);
    if (i == 0 && c < 0x80)
      out += char(std::toupper(int(c)));
    else if (i == 0)
      out.append(text.substr(0, size_t(n)));
    else
      text::append_lowercase(out, c);
    i += size_t(n);
  }
  return out;
}

int64_t code_points(std::string_view text) {
  return std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

}  // namespace cotan::eval
