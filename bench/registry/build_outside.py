"""Builds the outside retrieval set from two public tool-calling datasets shipped in packages.

    .venv/bin/python bench/registry/build_outside.py [--bfcl WHEEL] [--nestful WHEEL]

Without a wheel path, the script asks pip for the pinned wheel (`pip download --no-deps`, the ordinary
client; nothing is installed) and reads the data files out of it with zipfile. It writes
bench/registry/data/outside/{tools,queries}.jsonl; SOURCES.md there names the sources and licences.

- BFCL (`bfcl-eval`, Apache-2.0): the single-turn categories whose answers name the functions
  (simple_python/java/javascript, multiple, parallel, parallel_multiple and their live_* versions). Every
  function offered with any question becomes a tool; a question's expected tools are the functions of
  its ground-truth calls. Functions offered under one name with several definitions keep the first.
- NESTFUL (`nestful-wrapper`, Apache-2.0): the executable and non-executable (glaive, sgd) sets: a request
  and the sequence of API calls that answers it; every call's tool is expected (multi-intent requests).

Each query gets a fixed split from a hash of its id: `tune` (40 %) for choosing weights and methods,
`held_out` (60 %) for the figures that are reported. Tool names outside toolhub's name syntax
([A-Za-z0-9_.-]{1,64}) are mapped to it the same way in tools and in expected names.
"""

import argparse
import hashlib
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parent / "data" / "outside"
BFCL = "bfcl-eval==2026.3.23"
NESTFUL = "nestful-wrapper==0.1.7"
BFCL_CATEGORIES = (
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
NESTFUL_SETS = (
    ("executable", "executable/executable"),
    ("glaive", "non-executable/non-executable-glaive"),
    ("sgd", "non-executable/non-executable-sgd"),
)
TUNE_SHARE = 4  # of 10


def wheel(requirement: str, given: str | None, folder: str) -> zipfile.ZipFile:
    if given:
        return zipfile.ZipFile(given)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", folder, requirement], check=True
    )
    name = requirement.split("==")[0].replace("-", "_")
    return zipfile.ZipFile(next(Path(folder).glob(f"{name}-*.whl")))


def tool_name(name: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:64]
    return clean or "unnamed"


def split_of(query_id: str) -> str:
    return "tune" if int(hashlib.sha256(query_id.encode()).hexdigest(), 16) % 10 < TUNE_SHARE else "held_out"


def json_schema(parameters: object) -> dict:
    """BFCL's parameter blocks use type "dict" (Python names); the registry stores JSON Schema."""
    names = {"dict": "object", "float": "number", "tuple": "array", "list": "array", "any": "string"}

    def fix(node: object) -> object:
        if isinstance(node, dict):
            out = {key: fix(value) for key, value in node.items()}
            if isinstance(out.get("type"), str):
                out["type"] = names.get(out["type"], out["type"])
            return out
        if isinstance(node, list):
            return [fix(item) for item in node]
        return node

    schema = fix(parameters) if isinstance(parameters, dict) else {}
    return schema if isinstance(schema, dict) and schema.get("type") == "object" else {"type": "object"}


def bfcl(archive: zipfile.ZipFile, tools: dict[str, dict], queries: list[dict]) -> None:
    for category in BFCL_CATEGORIES:
        questions = archive.read(f"bfcl_eval/data/BFCL_v4_{category}.json").decode().splitlines()
        answers = archive.read(f"bfcl_eval/data/possible_answer/BFCL_v4_{category}.json").decode().splitlines()
        truth = {row["id"]: row["ground_truth"] for row in map(json.loads, filter(None, answers))}
        for row in map(json.loads, filter(None, questions)):
            for function in row["function"]:
                name = tool_name(function["name"])
                tools.setdefault(
                    name.lower(),
                    {
                        "name": name,
                        "description": function.get("description") or "",
                        "input_schema": json_schema(function.get("parameters")),
                        "server": "bfcl",
                    },
                )
            turn = row["question"][0] if row["question"] else []
            text = "\n".join(m["content"] for m in turn if m.get("role") == "user" and m.get("content"))
            expected = sorted({tool_name(name) for call in truth.get(row["id"], []) for name in call})
            if text.strip() and expected:
                queries.append({"id": f"bfcl/{row['id']}", "query": text, "expected": expected})


def nestful_schema(spec: dict) -> dict:
    properties = {}
    required = []
    for name, parameter in (spec.get("query_parameters") or {}).items():
        parameter = dict(parameter) if isinstance(parameter, dict) else {}
        if parameter.pop("required", False):
            required.append(name)
        properties[name] = json_schema({"type": "object", "properties": {"x": parameter}})["properties"]["x"]
    schema: dict = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def nestful(archive: zipfile.ZipFile, tools: dict[str, dict], queries: list[dict]) -> None:
    for label, stem in NESTFUL_SETS:
        for spec in json.loads(archive.read(f"data_v1/{stem}-spec.json")):
            name = tool_name(spec["name"])
            tools.setdefault(
                name.lower(),
                {
                    "name": name,
                    "description": spec.get("description") or "",
                    "input_schema": nestful_schema(spec),
                    "server": "nestful",
                },
            )
        for number, row in enumerate(json.loads(archive.read(f"data_v1/{stem}-data.json"))):
            expected = sorted({tool_name(call["name"]) for call in row["output"] if call["name"] != "var_result"})
            if row["input"].strip() and expected:
                queries.append({"id": f"nestful/{label}/{number}", "query": row["input"], "expected": expected})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bfcl", help=f"path of the {BFCL} wheel (else pip downloads it)")
    parser.add_argument("--nestful", help=f"path of the {NESTFUL} wheel (else pip downloads it)")
    args = parser.parse_args()
    tools: dict[str, dict] = {}
    queries: list[dict] = []
    with tempfile.TemporaryDirectory() as folder:
        bfcl(wheel(BFCL, args.bfcl, folder), tools, queries)
        nestful(wheel(NESTFUL, args.nestful, folder), tools, queries)
    known = {name.lower() for name in tools}
    queries = [q for q in queries if all(name.lower() in known for name in q["expected"])]
    for query in queries:
        query["split"] = split_of(query["id"])
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / "tools.jsonl", "w") as out:
        for tool in sorted(tools.values(), key=lambda t: t["name"].lower()):
            out.write(json.dumps(tool, ensure_ascii=False, sort_keys=True) + "\n")
    with open(OUT / "queries.jsonl", "w") as out:
        for query in queries:
            out.write(json.dumps(query, ensure_ascii=False, sort_keys=True) + "\n")
    tune = sum(q["split"] == "tune" for q in queries)
    multi = sum(len(q["expected"]) > 1 for q in queries)
    held = len(queries) - tune
    print(f"{len(tools)} tools, {len(queries)} queries ({tune} tune, {held} held out; {multi} multi-tool)")


if __name__ == "__main__":
    main()
