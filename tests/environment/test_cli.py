"""`python -m einjit`, run as a user runs it (a subprocess): the tree and the plan, --bench
checked against numpy, --isa/--disassemble for either ISA on any host, and exit status 2 with
a clear message for bad input."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import einjit

REPO = Path(__file__).resolve().parents[2]


def run(*args, timeout=240):
    env = dict(os.environ, PYTHONPATH=str(REPO), EINJIT_VERBOSE="0")
    return subprocess.run([sys.executable, "-m", "einjit", *args], capture_output=True,
                          text=True, env=env, timeout=timeout, cwd=REPO)


@pytest.mark.native
def test_subscripts_print_the_tree_and_the_plan():
    result = run("ij,jk->ik", "48x40", "40x24")
    assert result.returncode == 0, result.stderr
    expr = einjit.contract_expression("ij,jk->ik", (48, 40), (40, 24))
    out = result.stdout
    assert f"tree as planned: {expr.tree}" in out
    assert expr.tree.pretty() in out
    assert "dims: 0=i(48), 1=j(40), 2=k(24)" in out
    assert re.search(r"main: brgemm gemm \d+x\d+x\d+", out)
    assert result.stderr == ""


@pytest.mark.native
def test_bracket_notation_with_sizes():
    tree = "[[8,4],[7,3,8]->[7,3,4]],[[[2,6,7],[1,5,6]->[1,2,5,7]],[0,5]->[0,1,2,7]]->[0,1,2,3,4]"
    sizes = [10, 7, 12, 8, 3, 9, 11, 4, 3]
    result = run(tree, ",".join(map(str, sizes)), "--bench", "--seconds", "0.02")
    assert result.returncode == 0, result.stderr
    given = einjit.EinsumTree(tree, sizes)
    assert f"tree as given: {tree}" in result.stdout and given.pretty() in result.stdout
    assert len(re.findall(r"^step \d+:", result.stdout, re.M)) == 4
    error = float(re.search(r"relative error vs numpy \(float64\) (\S+)", result.stdout)[1])
    assert error < 1e-5
    for who in ("einjit", "numpy.einsum"):
        assert re.search(rf"^{re.escape(who)}\s+[\d.]+ ms,\s+[\d.]+ GFLOPS$", result.stdout,
                         re.M), result.stdout


def test_sizes_may_be_separate_words():
    one = run("[0,1],[1,2]->[0,2]", "6,5,4", "--quiet")
    words = run("[0,1],[1,2]->[0,2]", "6", "5", "4", "--quiet")
    assert one.returncode == words.returncode == 0
    assert one.stdout == words.stdout and "0,2" in one.stdout


@pytest.mark.native
@pytest.mark.parametrize("isa, mnemonic", [("aarch64", "fmla"), ("x86_64:avx2", "vfmadd")])
def test_disassembly_for_any_isa(isa, mnemonic):
    pytest.importorskip("capstone")
    result = run("ij,jk->ik", "64x48", "48x32", "--isa", isa, "--disassemble", "--quiet")
    assert result.returncode == 0, result.stderr
    target = einjit.resolve_target(isa)
    assert f"== step 0 on {target.name}:" in result.stdout
    assert f"TensorOperation float32 on {target.name}" in result.stdout or \
        target == einjit.resolve_target(None)
    assert mnemonic in result.stdout
    assert "ret" in result.stdout


@pytest.mark.parametrize("args, message", [
    (("ij,jk->ik$", "4x5", "5x6"), "invalid character '$'"),
    (("ij,jk->ik", "4x5", "6x6"), "subscript 'j' has size 6 in operand 1 but 5"),
    (("ij,jk->ik", "4x5"), "fewer operands (1)"),
    (("ij,jk->ik", "4xz", "5x6"), "shape '4xz' is not a shape"),
    (("[0,1],[1,2]->[0,2]", "8,4"), "dimension id 2 has no size"),
    (("[0,1],[1,2->[0,2]", "8,4,6"), "unexpected '->'"),
    (("[0,1],[1,2]->[0,2]",), "needs the dims' sizes"),
    (("ij->ji", "3x4", "--isa", "sparc"), "sparc"),
    (("ij->ji", "3x4", "--threads", "0"), "--threads 0"),
])
def test_bad_input_exits_2_with_a_message(args, message):
    result = run(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("einjit: error: ") and message in result.stderr, \
        result.stderr
    assert "Traceback" not in result.stderr


def test_malformed_command_line_exits_2():
    result = run()
    assert result.returncode == 2 and "usage: python -m einjit" in result.stderr
    assert run("--help").returncode == 0


def test_zero_size_shapes_are_evaluated_by_numpy_as_the_api_does():
    result = run("ij,jk->ik", "4x0", "0x4", "--bench", "--seconds", "0.01")
    assert result.returncode == 0, result.stderr
    assert "numpy.einsum evaluates it (an operand has a zero-size dimension)" in result.stdout
    assert "result shape (4, 4)" in result.stdout
    assert float(re.search(r"relative error vs numpy \(float64\) (\S+)", result.stdout)[1]) == 0
    mismatch = run("ij,jk->ik", "4x0", "3x4")
    assert mismatch.returncode == 2 and "subscript 'j' has size" in mismatch.stderr


def test_another_isa_heads_the_plan_with_its_target():
    result = run("ij,jk->ik", "64x48", "48x32", "--isa", "aarch64")
    assert result.returncode == 0, result.stderr
    host = einjit.resolve_target(None)
    target = einjit.resolve_target("aarch64")
    heads = re.findall(r"^TensorOperation float32 on (\S+),", result.stdout, re.M)
    assert heads and set(heads) == {target.name}, result.stdout
    assert host == target or host.name not in result.stdout
    assert f"== step 0 on {target.name}:" in result.stdout


def test_profile_for_a_thread_count_this_machine_lacks():
    result = run("ij,jk->ik", "1536x1536", "1536x1536", "--threads", "72", "--profile",
                 "--quiet")
    assert result.returncode == 0, result.stderr
    expr = einjit.contract_expression("ij,jk->ik", (1536, 1536), (1536, 1536))
    profile = expr.parallel_profile(72)
    assert str(profile) in result.stdout
    assert "on 72 threads: predicted efficiency" in result.stdout


def test_profile_refuses_a_bad_thread_count():
    result = run("ij,jk->ik", "8x8", "8x8", "--threads", "0", "--profile")
    assert result.returncode == 2
    assert "--threads 0" in result.stderr
