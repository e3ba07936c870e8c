// ICU, for one property utf8proc lacks: a character's age. Apart from text/unicode.cpp because
// ICU's headers and Oniguruma's both define UChar.
#include <unicode/uchar.h>

#include "text/unicode.hpp"

namespace cotan::text {

std::pair<int, int> unicode_age(char32_t c) {
  UVersionInfo age;
  u_charAge(UChar32(c), age);
  return {age[0], age[1]};
}

}  // namespace cotan::text
