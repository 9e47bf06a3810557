"""The packages of apex_core import each other in layers, without cycles (docs/layers.md), the
modules inside each package import each other without cycles either, and code outside the grader
reaches it only through its front door (``apex_core/grader/__init__.py``)."""

import ast
import re
import subprocess
import sys
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
    modules = {module_name(source, library.parent): source for source in library.rglob("*.py")}
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


GRADER = "apex_core.grader"
GRADER_DOORS = {GRADER: "apex_core.grader", "apex_core.grader.magpie": "apex_core.grader.magpie"}
OUTSIDE_THE_GRADER = ("apex_core", "servers", "benchmarks")


def door_names() -> dict[str, set[str]]:
    """Front door -> the names it exports (its ``__all__``; the grader's door is lazy, so this
    imports no submodule)."""
    import importlib

    return {door: set(importlib.import_module(door).__all__) for door in GRADER_DOORS}


def module_name(source: Path, root: Path) -> str:
    parts = list(source.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def past_the_door(source: Path, root: Path, exported: dict[str, set[str]]) -> list[str]:
    """'file:line: what' for every import in ``source`` that reaches a grader submodule instead of
    a front door, imports inside functions included."""
    found = []
    importer = module_name(source, root)
    package = importer if source.name == "__init__.py" else importer.rpartition(".")[0]

    def inside(module: str) -> bool:
        return module == GRADER or module.startswith(GRADER + ".")

    for node in ast.walk(ast.parse(source.read_text(), filename=str(source))):
        if isinstance(node, ast.Import):
            wrong = [a.name for a in node.names if inside(a.name) and a.name not in GRADER_DOORS]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: resolved against the importer's package
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{module}" if module else base
            if module == "apex_core":
                wrong = [f"apex_core.{a.name}" for a in node.names if inside(f"apex_core.{a.name}")
                         and f"apex_core.{a.name}" not in GRADER_DOORS]
            elif module in GRADER_DOORS:
                doors = {d.rpartition(".")[2] for d in GRADER_DOORS if d.startswith(module + ".")}
                wrong = [f"{module}.{a.name}" for a in node.names if a.name not in exported[module] | doors]
            else:
                wrong = [module] if inside(module) else []
        else:
            continue
        found += [f"{source.relative_to(root)}:{node.lineno}: {name}" for name in wrong]
    return found


def imports_past_the_grader_door(root: Path = REPO_ROOT, exported: dict[str, set[str]] | None = None) -> dict[str, list[str]]:
    """File (relative to ``root``) -> its imports that reach past the grader's front door, for every
    module of apex_core (outside apex_core/grader/), servers and benchmarks."""
    exported = door_names() if exported is None else exported
    grader = root / "apex_core" / "grader"
    found: dict[str, list[str]] = {}
    for top in OUTSIDE_THE_GRADER:
        for source in sorted((root / top).rglob("*.py")):
            if grader in source.parents:
                continue
            wrong = past_the_door(source, root, exported)
            if wrong:
                found[source.relative_to(root).as_posix()] = wrong
    return found


def test_code_outside_the_grader_imports_only_from_its_front_door():
    wrong = [line for lines in imports_past_the_grader_door().values() for line in lines]
    assert wrong == [], "import these from apex_core.grader (export them in its __init__ if they are not yet)"


def test_an_import_of_a_grader_submodule_is_found_wherever_it_is(tmp_path):
    (tmp_path / "apex_core" / "grader").mkdir(parents=True)
    (tmp_path / "servers").mkdir()
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "apex_core" / "grader" / "judge.py").write_text("from apex_core.grader.result import GradeResult\n")
    (tmp_path / "apex_core" / "cli.py").write_text(
        "from apex_core.grader import GradeResult, magpie\n"
        "from apex_core import grader\n"
        "def grade():\n"
        "    from apex_core.grader.judge import grade\n"
        "    import apex_core.grader.cache\n"
        "    from apex_core.grader import judge\n"
        "    from apex_core.grader.magpie import run_magpie, workspace\n")
    (tmp_path / "servers" / "tool.py").write_text("import apex_core.grader\nimport apex_core.grader.magpie\n")
    (tmp_path / "benchmarks" / "bench.py").write_text("if True:\n    from apex_core.grader.isolation import sandbox\n")
    exported = {"apex_core.grader": {"GradeResult", "grade"}, "apex_core.grader.magpie": {"run_magpie"}}
    assert imports_past_the_grader_door(tmp_path, exported) == {
        "apex_core/cli.py": ["apex_core/cli.py:4: apex_core.grader.judge", "apex_core/cli.py:5: apex_core.grader.cache",
                             "apex_core/cli.py:6: apex_core.grader.judge", "apex_core/cli.py:7: apex_core.grader.magpie.workspace"],
        "benchmarks/bench.py": ["benchmarks/bench.py:2: apex_core.grader.isolation"],
    }


def test_reading_a_result_through_the_front_door_imports_neither_numpy_nor_torch():
    code = ("import sys\nfrom apex_core.grader import GradeOptions, GradeResult\n"
            "print(sorted(m for m in ('numpy', 'torch', 'apex_core.grader.judge') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert done.stdout.strip() == "[]"


def test_every_name_the_front_door_exports_is_there():
    import apex_core.grader

    missing = []
    for name in apex_core.grader.__all__:
        try:
            getattr(apex_core.grader, name)
        except AttributeError:
            missing.append(name)
    assert missing == [] and set(apex_core.grader.__all__) <= set(dir(apex_core.grader))


def test_starting_an_mcp_server_or_reading_profiles_imports_no_torch():
    """Each of the six servers and the gateway starts in tests and in every host session; PyTorch
    costs 1.7 s of CPU a start on the CI machine (2026-12-06), and a server imports it on the first
    call that runs a model, not before."""
    modules = ["servers.grader", "servers.source", "servers.identifier", "servers.patcher", "servers.profiler",
               "servers.pipeline", "servers.gateway", "apex_core.profiling"]
    code = f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\nprint('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert done.stdout.strip() == "False"
    from apex_core.profiling import TRACE_FILE, capture

    assert callable(capture) and TRACE_FILE == "trace.json"  # there on first use
