#include "util/json.hpp"

#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>
#include <unordered_set>

namespace cotan {

JsonParseError::JsonParseError(std::string reason, size_t line, size_t column, size_t offset)
    : Error(cat("[json] line ", line, ", column ", column, ": ", reason)),
      reason_(std::move(reason)),
      line_(line),
      column_(column),
      offset_(offset) {}

namespace {

// An iterator over the text that records how far the parser has read: nlohmann's errors and
// callbacks carry no position, so the duplicate-key and depth errors take it from here.
struct TrackedChar {
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  const char* p = nullptr;
  const char** read_end = nullptr;  // one past the last character the parser took

  reference operator*() const { return *p; }
  TrackedChar& operator++() {
    *read_end = ++p;
    return *this;
  }
  TrackedChar operator++(int) {
    TrackedChar before = *this;
    ++*this;
    return before;
  }
  bool operator==(const TrackedChar& other) const { return p == other.p; }
};

bool is_number_char(char c) { return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'; }

// nlohmann's message without its "[json.exception.parse_error.101] parse error at line 1,
// column 4: " prefix.
std::string nlohmann_reason(const nlohmann::json::exception& e) {
  std::string_view what = e.what();
  size_t id_end = what.find("] ");
  if (id_end != std::string_view::npos) what.remove_prefix(id_end + 2);
  if (what.starts_with("parse error")) {
    size_t colon = what.find(": ");
    if (colon != std::string_view::npos) what.remove_prefix(colon + 2);
  }
  return std::string(what);
}

}  // namespace

// Runs nlohmann's SAX parser over the text and passes its events on to the handler, checking the
// depth on the way and turning nlohmann's errors into JsonParseErrors.
class JsonSax::Driver final : public nlohmann::json_sax<Json> {
 public:
  Driver(std::string_view text, JsonSax& handler, size_t max_depth)
      : text_(text), handler_(handler), max_depth_(max_depth) {}

  void run() {
    const char* read_end = text_.data();
    read_end_ = &read_end;
    TrackedChar first{text_.data(), &read_end}, last{text_.data() + text_.size(), &read_end};
    const Driver* outer = handler_.driver_;
    handler_.driver_ = this;
    struct Restore {
      JsonSax& handler;
      const Driver* outer;
      ~Restore() { handler.driver_ = outer; }
    } restore{handler_, outer};
    try {
      Json::sax_parse(first, last, this);
    } catch (const nlohmann::json::exception& e) {
      throw Error(cat("[json] ", nlohmann_reason(e)));
    }
  }

  bool null() override { return handler_.null(); }
  bool boolean(bool value) override { return handler_.boolean(value); }
  bool number_integer(number_integer_t value) override { return handler_.number_integer(value); }
  bool number_unsigned(number_unsigned_t value) override { return handler_.number_unsigned(value); }
  bool number_float(number_float_t value, const string_t& text) override { return handler_.number_float(value, text); }
  bool string(string_t& value) override { return handler_.string(value); }
  bool binary(binary_t&) override { return true; }
  bool start_object(size_t elements) override { return enter() && handler_.start_object(elements); }
  bool key(string_t& key) override {
    key_close_ = read_offset() - 1;  // the key's closing quote was the last character read
    return handler_.key(key);
  }
  bool end_object() override {
    --depth_;
    return handler_.end_object();
  }
  bool start_array(size_t elements) override { return enter() && handler_.start_array(elements); }
  bool end_array() override {
    --depth_;
    return handler_.end_array();
  }

  bool parse_error(size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    if (e.id == 406) {
      // "number overflow": the number just read is too large for a double.
      const auto [begin, end] = number_before(read_offset());
      error_at(begin, cat("number ", text_.substr(begin, end - begin), " is too large for a double"));
    }
    if (e.id / 100 != 1) throw Error(cat("[json] ", nlohmann_reason(e)));
    // position counts the characters read, the one that stopped the parser included.
    error_at(position > 0 ? position - 1 : 0, nlohmann_reason(e));
  }

  // The opening quote of the last key: the first quote before its closing one that no odd run of
  // backslashes escapes.
  size_t key_start() const {
    for (size_t i = key_close_; i-- > 0;) {
      if (text_[i] != '"') continue;
      size_t slashes = 0;
      while (slashes < i && text_[i - 1 - slashes] == '\\') ++slashes;
      if (slashes % 2 == 0) return i;
    }
    return 0;
  }

  [[noreturn]] void error_at(size_t offset, const std::string& reason) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < offset && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else if ((uint8_t(text_[i]) & 0xC0) != 0x80) {
        ++column;
      }
    }
    throw JsonParseError(reason, line, column, offset);
  }

 private:
  bool enter() {
    // The '{' or '[' was the last character read.
    if (depth_ >= max_depth_) error_at(read_offset() - 1, cat("nesting deeper than ", max_depth_, " levels"));
    ++depth_;
    return true;
  }

  size_t read_offset() const { return size_t(*read_end_ - text_.data()); }

  // [begin, end) of the number that ends at `read` or one character before it (the lexer reads
  // one character past a number).
  std::pair<size_t, size_t> number_before(size_t read) const {
    size_t end = std::min(read, text_.size());
    if (end > 0 && !is_number_char(text_[end - 1])) --end;
    size_t begin = end;
    while (begin > 0 && is_number_char(text_[begin - 1])) --begin;
    return {begin, end};
  }

  std::string_view text_;
  JsonSax& handler_;
  size_t max_depth_;
  const char** read_end_ = nullptr;
  size_t depth_ = 0;
  size_t key_close_ = 0;
};

void JsonSax::key_error(const std::string& reason) const {
  if (!driver_) fail("json", "key_error outside sax_parse_json: ", reason);
  driver_->error_at(driver_->key_start(), reason);
}

void sax_parse_json(std::string_view text, JsonSax& handler, size_t max_depth) {
  JsonSax::Driver(text, handler, max_depth).run();
}

namespace {

// parse_json's handler: builds the value, refusing a key that its object already has.
class JsonBuilder final : public JsonSax {
 public:
  explicit JsonBuilder(const JsonParseOptions& options) : options_(options) {}
  Json take() { return std::move(root_); }

  bool null() override { return place(nullptr); }
  bool boolean(bool value) override { return place(value); }
  bool number_integer(number_integer_t value) override { return place(value); }
  bool number_unsigned(number_unsigned_t value) override { return place(value); }
  bool number_float(number_float_t value, const string_t&) override { return place(value); }
  bool string(string_t& value) override { return place(std::move(value)); }
  bool start_object(size_t) override { return open(Json::object()); }
  bool start_array(size_t) override { return open(Json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& key) override {
    Frame& frame = frames_.back();
    if (!frame.keys.insert(key).second) {
      std::vector<std::string> path;
      for (size_t i = 0; i + 1 < frames_.size(); ++i)
        if (frames_[i].value->is_object()) path.push_back(frames_[i].key);
      path.push_back(key);
      if (options_.on_duplicate_key) options_.on_duplicate_key(path);
      key_error(cat("duplicate key '", key, "'"));
    }
    frame.key = std::move(key);
    return true;
  }

 private:
  struct Frame {
    Json* value;  // an open array or object
    std::unordered_set<std::string> keys;
    std::string key;  // the member being read
  };

  // Puts a value where the parse is: the root, the next element of the innermost array, or the
  // value of the innermost object's last key.
  Json* put(Json value) {
    if (frames_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Frame& frame = frames_.back();
    if (frame.value->is_array()) {
      auto& elements = frame.value->get_ref<Json::array_t&>();
      elements.push_back(std::move(value));
      return &elements.back();
    }
    // ordered_map is a vector of members whose insert searches it first; the key is new (key()
    // checked), so the member is appended directly and a large object costs linear time.
    auto& members = frame.value->get_ref<Json::object_t&>();
    members.emplace_back(frame.key, std::move(value));
    return &members.back().second;
  }
  bool place(Json value) {
    put(std::move(value));
    return true;
  }
  // Pointers into open values stay valid: a container only grows after its last element closed.
  bool open(Json empty) {
    frames_.push_back({put(std::move(empty)), {}, {}});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }

  const JsonParseOptions& options_;
  Json root_;
  std::vector<Frame> frames_;
};

}  // namespace

Json parse_json(std::string_view text, const JsonParseOptions& options) {
  JsonBuilder builder(options);
  sax_parse_json(text, builder, options.max_depth);
  return builder.take();
}

Json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("json", path, ": cannot open the file");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) fail("json", path, ": read error");
  try {
    return parse_json(text.str());
  } catch (const JsonParseError& e) {
    fail("json", path, ": line ", e.line(), ", column ", e.column(), ": ", e.reason());
  }
}

std::string dump_json(const Json& value, int indent) {
  try {
    return value.dump(indent);
  } catch (const nlohmann::json::type_error& e) {
    std::string_view what = e.what();
    if (size_t id_end = what.find("] "); id_end != std::string_view::npos) what.remove_prefix(id_end + 2);
    fail("json", "cannot write a string that is not valid UTF-8: ", what);
  }
}

std::string_view kind_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "an integer";
    case Json::value_t::number_float: return "a number";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    case Json::value_t::binary: return "binary data";
    case Json::value_t::discarded: return "a discarded value";
  }
  return "?";
}

bool json_equal(const Json& a, const Json& b) {
  if (a.is_object() && b.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [key, value] : a.items()) {
      const auto other = b.find(key);
      if (other == b.end() || !json_equal(value, *other)) return false;
    }
    return true;
  }
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!json_equal(a[i], b[i])) return false;
    return true;
  }
  return a == b;  // numbers compare by value across integer and double
}

namespace {

[[noreturn]] void kind_error(const Json& value, std::string_view wanted) {
  fail("json", "expected ", wanted, ", got ", kind_name(value));
}

}  // namespace

bool as_bool(const Json& value) {
  if (!value.is_boolean()) kind_error(value, "a boolean");
  return value.get<bool>();
}

int64_t as_int(const Json& value) {
  if (value.is_number_integer() && !value.is_number_unsigned()) return value.get<int64_t>();
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > uint64_t(INT64_MAX)) fail("json", "integer ", u, " does not fit in an int64");
    return int64_t(u);
  }
  kind_error(value, "an integer");
}

uint64_t as_uint(const Json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) return uint64_t(value.get<int64_t>());
  if (value.is_number_integer()) fail("json", "expected a non-negative integer, got ", value.get<int64_t>());
  kind_error(value, "a non-negative integer");
}

double as_double(const Json& value) {
  if (!value.is_number()) kind_error(value, "a number");
  return value.get<double>();
}

const std::string& as_string(const Json& value) {
  if (!value.is_string()) kind_error(value, "a string");
  return value.get_ref<const std::string&>();
}

const Json* find_member(const Json& object, std::string_view key) {
  if (!object.is_object()) kind_error(object, "an object");
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

const Json& member(const Json& object, std::string_view key) {
  if (const Json* v = find_member(object, key)) return *v;
  fail("json", "no key '", key, "'");
}

// ---- JsonFields ----

JsonFields::JsonFields(const Json& object, std::string_view op, std::string_view source, std::string_view prefix)
    : object_(&object), op_(op), source_(source), prefix_(prefix) {
  if (!object.is_object()) {
    if (prefix_.empty()) error("expected a JSON object, got ", kind_name(object));
    error("field '", prefix_, "' must be an object, got ", kind_name(object));
  }
}

const Json* JsonFields::find(std::string_view key) const {
  const Json* v = find_member(*object_, key);
  return v && !v->is_null() ? v : nullptr;
}

std::string JsonFields::name(std::string_view key) const {
  return prefix_.empty() ? std::string(key) : cat(prefix_, ".", key);
}

std::optional<JsonFields> JsonFields::object(std::string_view key) const {
  const Json* v = find(key);
  if (!v) return std::nullopt;
  return JsonFields(*v, op_, source_, name(key));
}

bool JsonFields::read_value(const Json& v, bool& out) {
  if (!v.is_boolean()) return false;
  out = v.get<bool>();
  return true;
}

bool JsonFields::read_value(const Json& v, int64_t& out) {
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))) return false;
  out = v.get<int64_t>();
  return true;
}

bool JsonFields::read_value(const Json& v, uint64_t& out) {
  if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0)) return false;
  out = v.get<uint64_t>();
  return true;
}

bool JsonFields::read_value(const Json& v, double& out) {
  if (!v.is_number()) return false;
  out = v.get<double>();
  return true;
}

bool JsonFields::read_value(const Json& v, std::string& out) {
  if (!v.is_string()) return false;
  out = v.get<std::string>();
  return true;
}

std::string JsonFields::describe(const Json& v) {
  if (v.is_number()) return v.dump();
  return std::string(kind_name(v));
}

}  // namespace cotan
