#include "text/unicode.hpp"

#include <oniguruma.h>
#include <utf8proc.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "util/error.hpp"

namespace cotan::text {

char32_t utf8_at(std::string_view s, size_t i, int* length) {
  const auto b = [&](size_t k) { return char32_t(static_cast<unsigned char>(s[i + k])); };
  const char32_t lead = b(0);
  if (lead < 0x80) {
    *length = 1;
    return lead;
  }
  if (lead < 0xE0) {
    *length = 2;
    return ((lead & 0x1F) << 6) | (b(1) & 0x3F);
  }
  if (lead < 0xF0) {
    *length = 3;
    return ((lead & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  }
  *length = 4;
  return ((lead & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

size_t utf8_last_start(std::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

bool is_whitespace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  if (c == 0x85) return true;
  const utf8proc_category_t category = utf8proc_category(utf8proc_int32_t(c));
  return category == UTF8PROC_CATEGORY_ZS || category == UTF8PROC_CATEGORY_ZL || category == UTF8PROC_CATEGORY_ZP;
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const utf8proc_category_t category = utf8proc_category(utf8proc_int32_t(c));
  return category == UTF8PROC_CATEGORY_ND || category == UTF8PROC_CATEGORY_NL || category == UTF8PROC_CATEGORY_NO;
}

void append_lowercase(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += char(c >= 'A' && c <= 'Z' ? c + 32 : c);
  } else if (c == 0x130) {  // LATIN CAPITAL LETTER I WITH DOT ABOVE: SpecialCasing's "0069 0307"
    out += 'i';
    append_utf8(out, 0x307);
  } else {
    append_utf8(out, char32_t(utf8proc_tolower(utf8proc_int32_t(c))));
  }
}

namespace {

std::string normalize_known(std::string_view s, NormalForm form) {
  if (s.empty()) return {};
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::nfc: options |= UTF8PROC_COMPOSE; break;
    case NormalForm::nfd: options |= UTF8PROC_DECOMPOSE; break;
    case NormalForm::nfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case NormalForm::nfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                          utf8proc_ssize_t(s.size()), &mapped, utf8proc_option_t(options));
  if (n < 0) fail("tokenizer", "normalization failed: ", utf8proc_errmsg(n));
  std::string out(reinterpret_cast<const char*>(mapped), size_t(n));
  std::free(mapped);
  return out;
}

// Whether HF's normalizer knows `c`: it normalizes with the tables of Unicode 9.0, so a character
// assigned later is left as it is and, having no combining class there, stops reordering and
// composition around it.
bool known_to_hf(char32_t c) {
  const auto [major, minor] = unicode_age(c);
  return major < 9 || (major == 9 && minor == 0);
}

}  // namespace

std::string normalize(std::string_view s, NormalForm form) {
  bool ascii = true;
  for (char ch : s) ascii = ascii && static_cast<unsigned char>(ch) < 0x80;
  if (ascii) return std::string(s);  // every normal form of ASCII is itself
  // Runs of characters HF knows are normalized; the others pass through between them.
  std::string out;
  size_t run = 0;
  for (size_t i = 0; i < s.size();) {
    int length;
    const char32_t c = utf8_at(s, i, &length);
    if (c >= 0x80 && !known_to_hf(c)) {
      out += normalize_known(s.substr(run, i - run), form);
      out.append(s, i, size_t(length));
      run = i + size_t(length);
    }
    i += size_t(length);
  }
  if (run == 0) return normalize_known(s, form);
  out += normalize_known(s.substr(run), form);
  return out;
}

// ---- Regex ----

namespace {

void initialize_oniguruma() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

// One match region per thread, reused across searches.
struct RegionDeleter {
  void operator()(OnigRegion* region) const { onig_region_free(region, 1); }
};
OnigRegion* thread_region() {
  thread_local std::unique_ptr<OnigRegion, RegionDeleter> region(onig_region_new());
  return region.get();
}

const OnigUChar* bytes(std::string_view text) {
  static const char empty[1] = {0};
  return reinterpret_cast<const OnigUChar*>(text.empty() ? empty : text.data());
}

}  // namespace

Regex::Regex(std::string_view pattern, const std::string& where) {
  initialize_oniguruma();
  regex_t* regex = nullptr;
  OnigErrorInfo info;
  const OnigUChar* begin = bytes(pattern);
  const int code = onig_new(&regex, begin, begin + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                            ONIG_SYNTAX_DEFAULT, &info);
  if (code != ONIG_NORMAL) {
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, code, &info);
    fail("tokenizer", where, ": bad regex /", pattern, "/: ", reinterpret_cast<const char*>(message));
  }
  regex_ = regex;
}

Regex::~Regex() {
  if (regex_) onig_free(static_cast<regex_t*>(regex_));
}

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  out.clear();
  regex_t* regex = static_cast<regex_t*>(regex_);
  OnigRegion* region = thread_region();
  const OnigUChar* begin = bytes(text);
  const OnigUChar* end = begin + text.size();
  size_t from = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (from <= text.size()) {
    const int at = onig_search(regex, begin, end, begin + from, end, region, ONIG_OPTION_NONE);
    if (at == ONIG_MISMATCH) break;
    if (at < 0) fail("tokenizer", "regex search failed (Oniguruma error ", at, ")");
    const size_t s = size_t(region->beg[0]), e = size_t(region->end[0]);
    if (s == e && have_last && last_end == e) {
      // An empty match right after the previous one: step over one character and search again.
      from += from < text.size() ? utf8_length(static_cast<unsigned char>(text[from])) : 1;
      continue;
    }
    from = e;
    have_last = true;
    last_end = e;
    out.emplace_back(s, e);
  }
}

bool Regex::matches_at(std::string_view text, size_t at) const {
  const OnigUChar* begin = bytes(text);
  const int n = onig_match(static_cast<regex_t*>(regex_), begin, begin + text.size(), begin + at, thread_region(),
                           ONIG_OPTION_NONE);
  return n >= 0;
}

void find_literal(std::string_view text, std::string_view literal, std::vector<std::pair<size_t, size_t>>& out) {
  out.clear();
  if (literal.empty()) return;
  for (size_t at = text.find(literal); at != std::string_view::npos; at = text.find(literal, at + literal.size()))
    out.emplace_back(at, at + literal.size());
}

}  // namespace cotan::text
