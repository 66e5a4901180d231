"""Labels the structured-output test strings with Python reference implementations.

  regex       -> re.fullmatch(pattern, s, re.ASCII)   (our \\d \\w \\s are ASCII, like re.ASCII)
  json_schema -> jsonschema.validate (Draft 2020-12) after json.loads; invalid JSON is rejected
  ebnf        -> lark (Earley, dynamic lexer) on a hand-written Lark twin of each GBNF grammar

Writes tests/data/structured/{regex,json_schema,ebnf}_cases.json, which the C++ test
(tests/unit/structured/reference_test.cc) compares accept/reject against.

Run (from the repository root):
  .venv/bin/pip install jsonschema lark
  .venv/bin/python tests/reference/structured/make_cases.py

JSON-Schema strings marked NONCANON are valid but outside our documented generation subset
(keys out of schema order, extra whitespace, ...): for those the C++ test only requires
"we accept => valid", never the converse.
"""
import json
import os
import re

import jsonschema
import lark

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "data", "structured")

REGEX = [
    (r"[a-z]+\d{2,3}", ["ab12", "x999", "a1", "abc1234", "12", "Ab12", "zz00"]),
    (r"(foo|bar)+(baz)?", ["foo", "foobar", "barfoobaz", "baz", "", "foob", "foobazbaz"]),
    (r"\w+@\w+\.(com|org)", ["a@b.com", "user_1@x.org", "a@b.net", "@b.com", "a@b.comm"]),
    (r"[^abc]*", ["", "def", "xyz1", "a", "dxa", "é"]),
    (r"\u00e9+|\u4e2d", ["é", "éé", "中", "e", "中中", ""]),
    (r"a{3}b{0,2}c{2,}", ["aaacc", "aaabbccc", "aacc", "aaabbbcc", "aaac"]),
    (r"(?:ab)*?c", ["c", "abc", "ababc", "abac", "ab"]),
    (r"^-?(0|[1-9]\d*)(\.\d+)?$", ["0", "-12.5", "01", "1.", "123", "-0.001", "--1"]),
    (r"\s*\S+\s*", [" a ", "abc", "", "   ", "a b", "\tz\n"]),
    (r"[\w.-]+", ["a.b-c_d", "a b", "", "---", "x/y"]),
    (r"(a|b)*a(a|b){3}", ["aaaa", "abbb", "babab", "aabbb", "bbbb", "ab"]),
    (r".{2}x", ["abx", "é中x", "\nax", "ax", "abcx"]),
    (r"[0-9a-fA-F]{4}-[A-Z][a-z]*", ["00ff-Abc", "ABCD-Z", "0g00-A", "1234-ab", "1234-"]),
    (r"\d+(,\d{3})*", ["1", "1,000", "12,345,678", "1,00", ",000", "1,0000"]),
    (r"\[\]\(\)\{\}\.\*", ["[](){}.*", "[](){}.x", ""]),
]

NONCANON = "noncanon"

SCHEMAS = [
    ("simple", {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name", "age"]},
     ['{"name":"Bob","age":30}', '{"name":"","age":-5}', '{"name":"Bob"}',
      ('{"age":30,"name":"Bob"}', NONCANON), '{"name":"Bob","age":30.5}', '{"name":"Bob","age":"30"}',
      '{"name":"a\\"b\\u00e9","age":0}',
      ('{"name": "Bob", "age": 30}', NONCANON), ('{"name":"Bob","age":30,"x":1}', NONCANON), '{"name":"Bob","age":007}']),
    ("optional", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"},
                                                    "c": {"type": "null"}}, "required": ["b"]},
     ['{"b":true}', '{"a":1,"b":false}', '{"b":true,"c":null}', '{"a":1,"b":true,"c":null}', '{}',
      '{"a":1}', '{"a":1,"c":null}', '{"b":true,,"c":null}', ('{"c":null,"b":true}', NONCANON)]),
    ("int_range", {"type": "integer", "minimum": -15, "maximum": 237},
     ["-15", "-16", "0", "237", "238", "99", "100", "-9", "1000", ("-0", NONCANON), "42"]),
    ("int_excl", {"type": "integer", "exclusiveMinimum": 9, "exclusiveMaximum": 1000},
     ["9", "10", "999", "1000", "500", "09", "-1"]),
    ("int_min_only", {"type": "integer", "minimum": 123},
     ["122", "123", "124", "999", "1000", "99999999", "-5"]),
    ("num_range", {"type": "number", "minimum": -2, "maximum": 3},
     ["-2", "3", "3.5", "2.999", "-2.5", "-1.5", "0.0", "4", "-3"]),
    ("enum", {"enum": ["red", "green", 42, None, {"a": [1, 2]}]},
     ['"red"', '"green"', '"blue"', "42", "null", '{"a":[1,2]}', "43", '"Red"']),
    ("const", {"const": "fixed"}, ['"fixed"', '"fixe"', '"fixedd"']),
    ("anyof", {"anyOf": [{"type": "string", "maxLength": 3}, {"type": "integer", "minimum": 10}]},
     ['"abc"', '"abcd"', "10", "9", '""', "true"]),
    ("array", {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4},
     ["[1,2]", "[1,2,3,4]", "[1]", "[1,2,3,4,5]", "[]", '[1,"a"]', "[1,2,3]"]),
    ("prefix", {"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}], "items": {"type": "null"}},
     ['["a",true]', '["a"]', "[]", '["a",true,null,null]', '["a",true,1]', '[true,"a"]']),
    ("strlen", {"type": "string", "minLength": 2, "maxLength": 4},
     ['"ab"', '"abcd"', '"a"', '"abcde"', '"\\n\\t"', '"éé"', '"中中中中中"']),
    ("pattern", {"type": "string", "pattern": "^[A-Z]{2}-\\d{3}$"},
     ['"AB-123"', '"ab-123"', '"AB-1234"', '"AB-12"']),
    ("pattern_unanchored", {"type": "string", "pattern": "ab+c"},
     ['"abc"', '"xxabbbcyy"', '"ac"', '"xyz"']),
    ("ref_recursive", {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "required": ["v"]}}, "$ref": "#/$defs/node"},
     ['{"v":1}', '{"v":1,"kids":[]}', '{"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4}]}]}',
      '{"v":1,"kids":[{"kids":[]}]}', '{"kids":[]}', '{"v":1,"kids":[1]}']),
    ("type_array", {"type": ["string", "null"]}, ['"x"', "null", "1", "true"]),
    ("allof", {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                         {"properties": {"b": {"type": "string"}}, "required": ["b"]}]},
     ['{"a":1,"b":"x"}', '{"a":1}', '{"b":"x"}', ('{"b":"x","a":1}', NONCANON)]),
    ("additional", {"type": "object", "properties": {"id": {"type": "integer"}},
                    "additionalProperties": {"type": "boolean"}},
     ['{"id":1}', '{"id":1,"x":true}', '{"x":true}', '{"id":1,"x":2}', '{"id":1,"id2":false,"y":true}', '{}']),
    ("nested", {"type": "object", "properties": {
        "user": {"type": "object", "properties": {"id": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
                 "required": ["id", "tags"]},
        "ok": {"type": "boolean"}}, "required": ["user", "ok"]},
     ['{"user":{"id":1,"tags":[]},"ok":true}', '{"user":{"id":1,"tags":["a","b"]},"ok":false}',
      '{"user":{"id":1},"ok":true}', '{"user":{"id":1,"tags":[1]},"ok":true}']),
    ("format_date", {"type": "string", "format": "date"}, ['"2024-02-29"', '"2024-13-01"', '"2024-1-01"']),
    ("format_uuid", {"type": "string", "format": "uuid"},
     ['"123e4567-e89b-12d3-a456-426614174000"', '"123e4567-e89b-12d3-a456-42661417400"', '"xyz"']),
    ("format_ipv4", {"type": "string", "format": "ipv4"}, ['"192.168.0.1"', '"256.1.1.1"', '"1.2.3"', '"0.0.0.0"']),
    ("any", {}, ['1', '"x"', '{"a":[1,{"b":null}]}', '[true,false]', '{"a":}', '[1,]']),
]

# (name, GBNF grammar, Lark twin, strings)
EBNF = [
    ("arith",
     'root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= factor (("*" | "/") factor)*\n'
     'factor ::= [0-9]+ | "(" expr ")"\n',
     'root: expr\nexpr: term (("+" | "-") term)*\nterm: factor (("*" | "/") factor)*\n'
     'factor: /[0-9]/+ | "(" expr ")"\n',
     ["1+2", "(1+2)*3", "((4))", "1+", "()", "12*(3-4)/5", "1++2", ""]),
    ("list",
     '# a comma-separated list\nroot ::= "[" ( item ( "," item )* )? "]"\nitem ::= [a-z]{1,3} | "\\"" [^"]* "\\""\n',
     'root: "[" ( item ( "," item )* )? "]"\nitem: /[a-z]/ /[a-z]/? /[a-z]/? | "\\"" /[^"]/* "\\""\n',
     ["[]", "[a,bc,def]", "[abcd]", '["x y",z]', '["unterminated]', "[a,]", "[ a]"]),
    ("balanced",
     'root ::= pair*\npair ::= "(" root ")" | "[" root "]"\n',
     'root: pair*\npair: "(" root ")" | "[" root "]"\n',
     ["", "()", "([])", "(]", "((", "()[]([()])", "]["]),
    ("kv",
     'root ::= line+\nline ::= key "=" val "\\n"\nkey ::= [A-Za-z_] [A-Za-z0-9_]*\nval ::= [0-9]+ | "\'" [^\'\\n]* "\'"\n',
     'root: line+\nline: key "=" val "\\n"\nkey: /[A-Za-z_]/ /[A-Za-z0-9_]/*\nval: /[0-9]/+ | "\'" /[^\'\\n]/* "\'"\n',
     ["a=1\n", "a=1\nb_2='x y'\n", "1a=2\n", "a=\n", "a=1", "x='it\n'\n"]),
]


def label_regex():
    out = []
    for pattern, strings in REGEX:
        out.append({"pattern": pattern, "cases": [
            {"s": s, "ok": re.fullmatch(pattern, s, re.ASCII) is not None} for s in strings]})
    return out


def label_schemas():
    out = []
    for name, schema, strings in SCHEMAS:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
        cases = []
        for item in strings:
            s, tag = (item if isinstance(item, tuple) else (item, ""))
            try:
                ok = validator.is_valid(json.loads(s))
            except json.JSONDecodeError:
                ok = False
            cases.append({"s": s, "ok": ok, "noncanon": tag == NONCANON})
        out.append({"name": name, "schema": json.dumps(schema), "cases": cases})
    return out


def label_ebnf():
    out = []
    for name, gbnf, lark_src, strings in EBNF:
        parser = lark.Lark(lark_src, start="root", parser="earley", lexer="dynamic")
        cases = []
        for s in strings:
            try:
                parser.parse(s)
                ok = True
            except lark.exceptions.LarkError:
                ok = False
            cases.append({"s": s, "ok": ok})
        out.append({"name": name, "grammar": gbnf, "cases": cases})
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    for fname, data in (("regex_cases.json", label_regex()), ("json_schema_cases.json", label_schemas()),
                        ("ebnf_cases.json", label_ebnf())):
        with open(os.path.join(OUT, fname), "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print("wrote", fname, sum(len(x["cases"]) for x in data), "cases")


if __name__ == "__main__":
    main()
