// EBNF front end: the GBNF dialect of llama.cpp's grammars/README.md (also what xgrammar's
// EBNF accepts):
//
//   root   ::= object | "null"        # comments run to the end of the line
//   object ::= "{" ws ( pair ( "," ws pair )* )? "}"
//   pair   ::= [a-z_]+ ":" ws [0-9]{1,3}
//   ws     ::= [ \t\n]*
//
// Literals in "..." or '...' with escapes \n \r \t \\ \" \' \[ \] \xHH \uHHHH \UHHHHHHHH;
// character classes [...] / [^...] with ranges (over code points, matched as UTF-8); `.` is any
// code point; `|`, `( )`, postfix `?` `*` `+` `{m}` `{m,}` `{m,n}` `{,n}`. A rule ends where the
// next `name ::=` begins, so alternatives may span lines. Errors: InvalidArgument
// "ebnf error at line L, column C: ..." (1-based; columns count bytes).
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "structured/grammar.h"

namespace deepinfer::structured {

Expected<Grammar> grammar_from_ebnf(std::string_view text, std::string_view root_rule = "root");

}  // namespace deepinfer::structured
