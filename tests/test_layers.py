"""einjit's layers, as docs/architecture.md ("The layers") describes them: every module belongs
to one layer and imports only from its own layer or the layers below it. The modules are read
with `ast`, not imported, so an import inside a function counts as much as one at the top;
imports under `if TYPE_CHECKING:` (annotations only, never executed) do not count."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "einjit"

# Top to bottom. The one list of the layers: docs/architecture.md shows the same order. A
# module maps to the layer of the longest name below that equals it or is a package above it.
LAYERS = (
    ("api", ("einjit", "einjit.__main__", "einjit.cli", "einjit.einsum", "einjit.numpy_api",
             "einjit.plan_cache", "einjit.dask")),
    ("frontend", ("einjit.frontend",)),
    ("passes", ("einjit.passes",)),
    ("ir", ("einjit.ir",)),
    ("codegen", ("einjit.codegen",)),
    ("kernels", ("einjit.primitives", "einjit.kernel")),
    ("isa backends", ("einjit.backends.aarch64", "einjit.backends.x86_64")),
    ("targets", ("einjit.backends", "einjit.backends.nest_plan")),
    ("presentation", ("einjit.display", "einjit.disasm")),
    ("runtime", ("einjit.runtime",)),
    ("base", ("einjit.errors", "einjit.limits", "einjit.log", "einjit.ops", "einjit.settings",
              "einjit.version")),
)
# packages of one instruction set each: none imports another
ISA_PACKAGES = ("einjit.backends.aarch64", "einjit.backends.x86_64")


def layer_of(module: str) -> int | None:
    """The index in LAYERS of `module`'s layer (0: the top), or None where no entry covers it.
    The package itself ("einjit") is an entry of its own, not a prefix of every module."""
    best, found = -1, None
    for index, (_, names) in enumerate(LAYERS):
        for name in names:
            covers = module == name or (name != "einjit" and module.startswith(name + "."))
            if covers and len(name) > best:
                best, found = len(name), index
    return found


def index_of(layer: str) -> int:
    return next(i for i, (name, _) in enumerate(LAYERS) if name == layer)


def _isa_package(module: str) -> str | None:
    return next((p for p in ISA_PACKAGES if module == p or module.startswith(p + ".")), None)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(node: ast.AST):
    """Every Import / ImportFrom under `node`, skipping `if TYPE_CHECKING:` bodies."""
    for child in ast.iter_child_nodes(node):
        # the body of `if TYPE_CHECKING:` runs only under a type checker; its else runs
        items = child.orelse if isinstance(child, ast.If) and _is_type_checking(child.test) \
            else [child]
        for item in items:
            if isinstance(item, (ast.Import, ast.ImportFrom)):
                yield item
            else:
                yield from _import_nodes(item)


def imported_modules(module: str, is_package: bool, source: str,
                     known: set[str]) -> list[tuple[int, str]]:
    """(line, module) for each einjit module that `source` (the text of `module`) imports;
    `from package import name` counts as the submodule where `known` has package.name."""
    found = []
    for node in _import_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
            continue
        if node.level:
            parts = module.split(".") if is_package else module.split(".")[:-1]
            parts = parts[:len(parts) - node.level + 1]
            base = ".".join(parts + ([node.module] if node.module else []))
        else:
            base = node.module
        for alias in node.names:
            candidate = f"{base}.{alias.name}"
            found.append((node.lineno, candidate if candidate in known else base))
    return sorted({(line, name) for line, name in found
                   if name == "einjit" or name.startswith("einjit.")})


def violations(modules: dict[str, tuple[bool, str]]) -> list[str]:
    """What breaks the layering in `modules` (name -> (is a package's __init__, source)): a
    module in no layer, an import of a higher layer, one ISA's package importing another's."""
    known = set(modules)
    problems = []
    for module, (is_package, source) in sorted(modules.items()):
        layer = layer_of(module)
        if layer is None:
            problems.append(f"{module} is in no layer: add it to LAYERS in tests/test_layers.py "
                            f"and to docs/architecture.md")
            continue
        for line, target in imported_modules(module, is_package, source, known):
            target_layer = layer_of(target)
            if target_layer is not None and target_layer < layer:
                problems.append(f"{module}:{line} imports {target}: layer "
                                f"{LAYERS[layer][0]!r} may not import the higher layer "
                                f"{LAYERS[target_layer][0]!r}")
            isa, target_isa = _isa_package(module), _isa_package(target)
            if isa and target_isa and isa != target_isa:
                problems.append(f"{module}:{line} imports {target}: one instruction set's "
                                f"backend may not import another's")
    return problems


def package_modules() -> dict[str, tuple[bool, str]]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        modules[name] = (is_package, path.read_text(encoding="utf-8"))
    return modules


def test_no_module_imports_a_higher_layer():
    modules = package_modules()
    assert len(modules) > 50 and "einjit.codegen.loop_nest" in modules
    assert violations(modules) == []


def test_every_layer_has_modules():
    modules = package_modules()
    empty = [name for index, (name, _) in enumerate(LAYERS)
             if not any(layer_of(module) == index for module in modules)]
    assert empty == []


def test_the_checker_finds_an_import_going_up():
    """The checker on made-up modules: each kind of upward import is reported with its line,
    downward and same-layer ones are not."""
    modules = {
        "einjit.runtime": (True, ""),
        "einjit.runtime.memory": (False, "import os\nfrom ..errors import EinjitError\n"),
        "einjit.runtime.bad": (False, "from einjit.codegen import compile_operation\n"),
        "einjit.runtime.lazy": (False, "def f():\n    from ..backends import Target\n"),
        "einjit.runtime.relative": (False, "from .. import kernel\n"),
        "einjit.runtime.typed": (False, "from typing import TYPE_CHECKING\n"
                                        "if TYPE_CHECKING:\n    from einjit.ir import Dim\n"),
        "einjit.kernel": (False, "from .runtime.memory import arena\nimport einjit.backends\n"),
        "einjit.backends.x86_64.loops": (False, "from einjit.backends.aarch64 import encode\n"),
        "einjit.backends.aarch64.encode": (False, ""),
        "einjit.backends.aarch64.up": (False, "import einjit\n"),
        "einjit.newthing": (False, ""),
    }
    found = violations(modules)
    assert len(found) == 6, found
    assert found[0].startswith("einjit.backends.aarch64.up:1 imports einjit: layer "
                               "'isa backends' may not import the higher layer 'api'")
    assert found[1].startswith("einjit.backends.x86_64.loops:1 imports "
                               "einjit.backends.aarch64.encode: one instruction set's")
    assert found[2].startswith("einjit.newthing is in no layer")
    assert found[3].startswith("einjit.runtime.bad:1 imports einjit.codegen: layer 'runtime'")
    assert found[4].startswith("einjit.runtime.lazy:2 imports einjit.backends: layer 'runtime'")
    assert found[5].startswith("einjit.runtime.relative:1 imports einjit.kernel: layer "
                               "'runtime' may not import the higher layer 'kernels'")


def test_layer_of_takes_the_longest_entry():
    assert layer_of("einjit") == index_of("api")
    assert layer_of("einjit.backends") == index_of("targets")
    assert layer_of("einjit.backends.x86_64.brgemm") == index_of("isa backends")
    assert layer_of("einjit.backends.nest_plan") == index_of("targets")
    assert layer_of("einjit.ir.verify") == index_of("ir")
    assert layer_of("einjit.unlisted") is None and layer_of("numpy") is None


def test_the_runtime_names_no_instruction_set():
    """The runtime knows nothing of instruction sets: no ISA's name appears in its code (a
    backend hands it what differs, such as the instruction-cache flush), except in the module
    that says which one the host runs."""
    names = {"aarch64", "arm64", "x86_64", "amd64", "x86"}
    found = []
    for module, (_, source) in package_modules().items():
        if layer_of(module) != index_of("runtime") or module == "einjit.runtime.host":
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    node.value.lower() in names:
                found.append(f"{module}:{node.lineno} {node.value!r}")
    assert found == []
