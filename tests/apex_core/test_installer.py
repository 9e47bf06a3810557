"""setup.sh installs with uv, which reads none of pip's configuration: what pip is told must reach uv."""

from apex_core.installer import uv_arguments

# `pip config list` on the CI machine (2026-12-06): a wheel directory, two local indexes and a
# constraints file, from /etc/pip.conf, /etc/xdg/pip and PIP_* variables.
CI_MACHINE = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.disable-pip-version-check='1'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
"""


def test_the_ci_machines_indexes_links_and_constraints_become_uv_flags_once_each():
    assert uv_arguments(CI_MACHINE) == [
        "--extra-index-url", "file:///opt/pypi/simple",
        "--extra-index-url", "file:///opt/pypi-more/simple",
        "--find-links", "/opt/wheels",
        "--constraint", "/etc/xdg/pip/constraints.txt",
    ]


def test_the_environment_overrides_the_files_and_no_index_carries_over():
    listed = "global.index-url='https://mirror.example/simple'\n:env:.index-url='https://other.example/simple'\n:env:.no-index='true'\n"
    assert uv_arguments(listed) == ["--index-url", "https://other.example/simple", "--no-index"]


def test_a_machine_without_pip_configuration_passes_nothing():
    assert uv_arguments("") == []
    assert uv_arguments("global.timeout='60'\nnot a config line\n") == []
