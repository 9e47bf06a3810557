"""The packages of apex_core import each other in layers, without cycles (docs/layers.md)."""

import ast
import re
from collections import defaultdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
LIBRARY = REPO_ROOT / "apex_core"


def declared_layers() -> dict[str, int]:
    """Package -> layer, from the table in docs/layers.md (the one place the layers are written)."""
    layers: dict[str, int] = {}
    for layer, packages in re.findall(r"^\| (\d) \| ([a-z_, ]+) \|", (REPO_ROOT / "docs" / "layers.md").read_text(), re.M):
        for package in packages.split(","):
            layers[package.strip()] = int(layer)
    return layers


def package_of(module: str) -> str | None:
    """The first-level package (or module) of apex_core that ``module`` belongs to."""
    parts = module.split(".")
    return parts[1] if parts[0] == "apex_core" and len(parts) > 1 else None


def import_graph(library: Path = LIBRARY) -> dict[str, dict[str, list[str]]]:
    """Importing package -> imported package -> the files that import it."""
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for source in sorted(library.rglob("*.py")):
        relative = source.relative_to(library.parent)
        if len(relative.parts) == 2 and relative.name == "__init__.py":
            continue  # apex_core/__init__.py: only the version
        importer = relative.parts[1].removesuffix(".py")
        for node in ast.walk(ast.parse(source.read_text(), filename=str(source))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
                if node.module == "apex_core":
                    modules = [f"apex_core.{alias.name}" for alias in node.names if alias.name != "__version__"]
            else:
                continue
            for module in modules:
                imported = package_of(module)
                if imported and imported != importer:
                    graph[importer][imported].append(str(relative))
    return graph


def find_cycle(graph: dict[str, dict[str, list[str]]]) -> list[str]:
    """One cycle of the graph as [a, b, ..., a], or [] if it has none."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = "open"
        path.append(node)
        for successor in sorted(graph.get(node, {})):
            if state.get(successor) == "open":
                return path[path.index(successor):] + [successor]
            if successor not in state:
                found = visit(successor)
                if found:
                    return found
        state[node] = "done"
        path.pop()
        return []

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return []


def test_the_packages_of_apex_core_import_each_other_without_a_cycle():
    graph = import_graph()
    cycle = find_cycle(graph)
    where = [f"{a} -> {b} in {sorted(set(graph[a][b]))[0]}" for a, b in zip(cycle, cycle[1:])]
    assert not cycle, "package cycle: " + "; ".join(where)


def test_every_package_has_a_layer_in_docs_layers_md():
    layers = declared_layers()
    packages = {p.name.removesuffix(".py") for p in LIBRARY.iterdir()
                if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.name != "__init__.py")}
    assert packages - set(layers) == set(), "give these a layer in docs/layers.md"
    assert set(layers) - packages == set(), "docs/layers.md names packages that do not exist"


def test_no_package_imports_from_a_layer_above_its_own():
    layers = declared_layers()
    upward = [
        f"{importer} (layer {layers[importer]}) imports {imported} (layer {layers[imported]}) in {sorted(set(files))[0]}"
        for importer, targets in import_graph().items()
        for imported, files in targets.items()
        if layers.get(imported, -1) > layers.get(importer, 99)
    ]
    assert upward == []


def test_the_cycle_finder_finds_a_cycle_and_names_it():
    graph = {"grader": {"tasks": ["g.py"]}, "tasks": {"prompts": ["t.py"]}, "prompts": {"tasks": ["p.py"]}}
    assert find_cycle(graph) == ["prompts", "tasks", "prompts"] or find_cycle(graph) == ["tasks", "prompts", "tasks"]
    assert find_cycle({"grader": {"tasks": ["g.py"]}, "tasks": {}}) == []
