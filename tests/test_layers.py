"""The packages of apex_core import each other in layers, without cycles (docs/layers.md), and the
modules inside each package import each other without cycles either."""

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


def module_graph(library: Path = LIBRARY) -> dict[str, dict[str, list[str]]]:
    """Module -> module of apex_core it imports -> the file, for every import statement, those inside
    functions included (an import deferred into a function closes a circle all the same, only later).
    ``from package import name`` counts as importing the submodule ``name`` where there is one, else
    the package; the parent package a submodule's import runs first is not counted."""
    modules = {}
    for source in library.rglob("*.py"):
        parts = list(source.relative_to(library.parent).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = source
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for name, source in modules.items():
        for node in ast.walk(ast.parse(source.read_text(), filename=str(source))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target.startswith("apex_core.") and target != name:
                    graph[name][target].append(str(source.relative_to(library.parent)))
    return graph


def package_cycles(graph: dict[str, dict[str, list[str]]]) -> dict[str, list[str]]:
    """Package -> one cycle among its own modules (the package's __init__ and its direct submodules)."""
    def parent(module: str) -> str:
        return module.rpartition(".")[0]

    packages = {parent(m) for m in graph} | set(graph)
    found = {}
    for package in sorted(p for p in packages if p.startswith("apex_core")):
        members = {m for m in set(graph) | {t for targets in graph.values() for t in targets} if m == package or parent(m) == package}
        inside = {m: {t: f for t, f in graph.get(m, {}).items() if t in members} for m in members}
        cycle = find_cycle(inside)
        if cycle:
            found[package] = cycle
    return found


def test_the_modules_of_each_package_import_each_other_without_a_cycle():
    graph = module_graph()
    cycles = {package: " -> ".join(f"{a} (in {sorted(set(graph[a][b]))[0]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"
              for package, cycle in package_cycles(graph).items()}
    assert cycles == {}, "move the registry that imports the modules out of the module they import (e.g. agents/registry.py)"


def test_a_registry_inside_the_interface_its_backends_import_is_a_cycle(tmp_path):
    package = tmp_path / "apex_core" / "agents"
    package.mkdir(parents=True)
    (tmp_path / "apex_core" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text("def make():\n    from apex_core.agents.claude import Claude\n    return Claude()\n")
    (package / "claude.py").write_text("from apex_core.agents.base import make\nclass Claude: ...\n")
    assert package_cycles(module_graph(tmp_path / "apex_core")) == {
        "apex_core.agents": ["apex_core.agents.base", "apex_core.agents.claude", "apex_core.agents.base"]}


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
