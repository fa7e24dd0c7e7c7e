"""The product's module graph: import cycles and function-level imports of project modules.

    python bench/import_graph.py            # prints the cycles, the function-level imports, exit 1 on a cycle

Reads the code with grimp (what import-linter uses) and Python's `ast`; nothing is imported or run.
Tests, migrations and benchmarks are left out: the rule is about the product's modules.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("toolhub", "tools_app", "mcp_app", "oauth_app")


def _is_product(module: str) -> bool:
    parts = module.split(".")
    return "tests" not in parts and "migrations" not in parts


def product_graph() -> grimp.ImportGraph:
    sys.path.insert(0, str(ROOT))
    return grimp.build_graph(*PACKAGES, cache_dir=None)


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), product modules only."""
    modules = sorted(m for m in graph.modules if _is_product(m))
    edges = {m: sorted(n for n in graph.find_modules_directly_imported_by(m) if _is_product(n)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for module in modules:
        if module not in index:
            visit(module)
    return found


def function_level_imports() -> list[tuple[str, int, str]]:
    """(file, line, imported module) for each import of a project module inside a function body."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if not _is_product(".".join(relative.with_suffix("").parts)):
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            for function in ast.walk(tree):
                if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                for node in ast.walk(function):
                    names: list[str] = []
                    if isinstance(node, ast.ImportFrom):
                        if node.level:
                            names = [f"(relative) {node.module or ''}"]
                        elif node.module and node.module.split(".")[0] in PACKAGES:
                            names = [node.module]
                    elif isinstance(node, ast.Import):
                        names = [a.name for a in node.names if a.name.split(".")[0] in PACKAGES]
                    for name in names:
                        found.append((str(relative), node.lineno, name))
    return sorted(set(found))


def main() -> int:
    graph = product_graph()
    found = cycles(graph)
    print(f"product modules: {sum(1 for m in graph.modules if _is_product(m))}")
    print(f"import cycles: {len(found)}")
    for component in found:
        print(f"  cycle of {len(component)}: {', '.join(component)}")
    local = function_level_imports()
    print(f"function-level imports of project modules: {len(local)}")
    for path, line, module in local:
        print(f"  {path}:{line} {module}")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
