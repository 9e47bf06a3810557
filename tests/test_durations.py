"""The suite's order under xdist (tests/durations.py): the longest work first, in blocks that keep a
group's tests, and a module's ungrouped tests, together and in their order."""

from tests.durations import UNKNOWN_S, block_of, dotted, longest_first


def test_a_node_id_and_a_junit_case_name_the_test_alike():
    assert dotted("tests/cli/test_cli.py::test_grade[a.py]@site-packages:tests/cli/test_cli.py") == "tests.cli.test_cli.test_grade[a.py]"
    assert dotted("tests/a/test_b.py::TestC::test_d") == "tests.a.test_b.TestC.test_d"


def test_groups_and_modules_are_the_blocks():
    assert block_of("tests/a/test_b.py::test_x@interpreter-check-1") == "@interpreter-check-1"
    assert block_of("tests/a/test_b.py::test_x[1]") == "tests/a/test_b.py"


def test_the_longest_block_goes_first_and_keeps_its_order_and_unknown_tests_count_as_short():
    nodeids = ["tests/m1.py::quick", "tests/m1.py::slow", "tests/m2.py::a@g", "tests/m3.py::b@g", "tests/m4.py::new"]
    recorded = {"tests.m1.quick": 1.0, "tests.m1.slow": 30.0, "tests.m2.a": 20.0, "tests.m3.b": 20.0}
    order = [nodeids[i] for i in longest_first(nodeids, recorded)]
    assert order == ["tests/m2.py::a@g", "tests/m3.py::b@g", "tests/m1.py::quick", "tests/m1.py::slow", "tests/m4.py::new"]
    assert UNKNOWN_S < 1.0
