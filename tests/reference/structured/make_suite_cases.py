"""Extracts the JSON-Schema-Test-Suite cases (draft 2020-12) that apply to generation from the
`jsonschema` source distribution, labels each instance with the `jsonschema` package and the
suite's own label, and writes tests/data/structured/suite_cases.json.

The C++ test (reference_test.cc, SuiteSoundness) compiles each schema; for schemas we support it
requires "we accept the compact serialisation => valid" (soundness); schemas we reject must be
rejected with an error, never a crash. Completeness is not required here (instances may be
non-canonical: other key orders, exponents, ...), but the count is printed.

Run (from the repository root):
  .venv/bin/pip download jsonschema==4.26.0 --no-binary :all: --no-deps -d /tmp/jsd
  tar xzf /tmp/jsd/jsonschema-4.26.0.tar.gz -C /tmp/jsd
  .venv/bin/python tests/reference/structured/make_suite_cases.py /tmp/jsd/jsonschema-4.26.0
"""
import json
import os
import sys

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "..", "data", "structured", "suite_cases.json")

FILES = [
    "type", "enum", "const", "properties", "required", "items", "prefixItems", "minItems", "maxItems",
    "minLength", "maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "anyOf", "oneOf", "allOf", "ref", "defs", "additionalProperties", "boolean_schema", "default",
    "optional/format/date", "optional/format/time", "optional/format/date-time", "optional/format/email",
    "optional/format/uuid", "optional/format/ipv4", "optional/format/ipv6", "optional/format/uri",
]


def main():
    root = os.path.join(sys.argv[1], "json", "tests", "draft2020-12")
    groups = []
    for name in FILES:
        with open(os.path.join(root, name + ".json"), encoding="utf-8") as f:
            suite = json.load(f)
        for group in suite:
            schema = group["schema"]
            cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
            validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
            cases = []
            for test in group["tests"]:
                data = test["data"]
                text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
                try:
                    ours_label = validator.is_valid(data)
                except Exception:  # e.g. unresolvable remote refs
                    ours_label = False
                cases.append({"s": text, "ok": bool(ours_label and test["valid"])})
            groups.append({"name": f"{name}: {group['description']}", "schema": json.dumps(schema), "cases": cases})
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(groups, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print("wrote", OUT, len(groups), "groups", sum(len(g["cases"]) for g in groups), "cases")


if __name__ == "__main__":
    main()
