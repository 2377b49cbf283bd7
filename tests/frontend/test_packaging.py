"""The wheel ships grammar/einsum.lark as the package data einjit.grammar, and every einjit
package; the frontend parses with the installed copy."""

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    if importlib.util.find_spec("pip") is None:
        pytest.skip("this interpreter has no pip (the aarch64 lane); the wheel is pure Python "
                    "and is built and checked on the host")
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "einjit", source / "einjit", ignore=ignore)
    shutil.copytree(ROOT / "grammar", source / "grammar", ignore=ignore)
    dist = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                           str(dist), str(source)], capture_output=True, text=True, timeout=300)
    if done.returncode != 0 and "satisfies the requirement setuptools" in done.stderr:
        pytest.skip("pip cannot fetch the build backend (setuptools>=68) on this machine")
    assert done.returncode == 0, done.stderr
    (built,) = dist.glob("einjit-*.whl")
    return built


@pytest.mark.slow
def test_wheel_holds_the_grammar_and_every_package(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "einjit/grammar/einsum.lark" in names
    on_disk = sorted(str(p.parent.relative_to(ROOT)) for p in (ROOT / "einjit").rglob("__init__.py")
                     if "__pycache__" not in p.parts)
    missing = [p for p in on_disk if f"{p}/__init__.py" not in names]
    assert not missing, (f"packages {missing} are not in the wheel: add them to "
                         f"[tool.setuptools] packages in pyproject.toml")


def test_installed_copy_parses_with_its_own_grammar(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    script = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import importlib.resources, einjit\n"
        "from einjit.frontend.grammar import grammar_text\n"
        "from einjit.frontend.parser import parse\n"
        "path = importlib.resources.files('einjit.grammar') / 'einsum.lark'\n"
        "assert str(path).startswith(sys.argv[1]), path\n"
        "assert einjit.__file__.startswith(sys.argv[1]), einjit.__file__\n"
        "assert grammar_text() == path.read_text()\n"
        "tree = einjit.EinsumTree('[[3,2],[4,1,3]->[4,1,2]],[0,4]->[0,1,2]', [2,3,4,5,6])\n"
        "print(tree, parse('ij,jk->ik').output[0].name)\n")
    done = subprocess.run([sys.executable, "-I", "-c", script, str(site)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[[3,2],[4,1,3]->[4,1,2]],[0,4]->[0,1,2]", "i"]
