// The Unicode pieces the tokenizer needs, over well-kept libraries: UTF-8 reading and writing,
// character properties and normalization (utf8proc), and regexes (Oniguruma, the engine HF
// tokenizers runs its patterns on).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cotan::text {

// ---- UTF-8 ----

// The code point at byte i of valid UTF-8 and its length in bytes.
char32_t utf8_at(std::string_view s, size_t i, int* length);
// The length in bytes of the character whose first byte is `lead` (valid UTF-8).
inline int utf8_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}
void append_utf8(std::string& out, char32_t c);
// The start of the last character of non-empty valid UTF-8.
size_t utf8_last_start(std::string_view s);

// ---- character properties (utf8proc) ----

// Rust's char::is_whitespace (the White_Space property): Zs, Zl, Zp, U+0009..U+000D and U+0085.
bool is_whitespace(char32_t c);
// Rust's char::is_numeric: the general categories Nd, Nl and No.
bool is_numeric(char32_t c);
// Rust's char::to_lowercase: the simple lowercase mapping, and U+0130 (the one character whose
// unconditional lowercase is two characters) to "i" U+0307.
void append_lowercase(std::string& out, char32_t c);

// The Unicode version that assigned `c` ({0, 0}: unassigned), from ICU (text/unicode_age.cpp:
// ICU's headers and Oniguruma's both define UChar).
std::pair<int, int> unicode_age(char32_t c);

// ---- normalization (utf8proc) ----

enum class NormalForm { nfc, nfd, nfkc, nfkd };
// `s` (valid UTF-8) in the normal form, as HF tokenizers computes it: with the normalization data
// of Unicode 9.0, the version of the crate HF uses. Characters assigned after 9.0 (their age from
// ICU) stay as they are and split the text around them; utf8proc normalizes the rest (the data of
// older characters never changes, by Unicode's stability policy).
std::string normalize(std::string_view s, NormalForm form);

// ---- regexes (Oniguruma, UTF-8, its default syntax, as HF's onig::Regex::new) ----

class Regex {
 public:
  // Throws "[tokenizer] WHERE: bad regex /pattern/: <Oniguruma's message>".
  Regex(std::string_view pattern, const std::string& where);
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  ~Regex();

  // The matches HF's onig find_iter gives, in order: non-overlapping, leftmost first, an empty
  // match right after the previous match skipped.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;
  // Whether the pattern matches at exactly byte `at` (anchored there; the text around is visible
  // to lookarounds).
  bool matches_at(std::string_view text, size_t at) const;

 private:
  void* regex_ = nullptr;  // regex_t*
};

// Matches a literal string: the matches of Regex(escaped literal), without a regex.
void find_literal(std::string_view text, std::string_view literal, std::vector<std::pair<size_t, size_t>>& out);

}  // namespace cotan::text
