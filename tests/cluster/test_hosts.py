"""Hosts files, node sets and Slurm node lists; hostile names never pass."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envtool.cluster import hosts
from envtool.errors import InputError


def test_hosts_file_with_users_ports_slots_and_comments(tmp_path: Path) -> None:
    path = tmp_path / "hosts.txt"
    path.write_text("# the lab\nnode1\nalice@node2:2222 slots=4  # big one\n\ngpu[01-03]\n")
    found = hosts.resolve(str(path))
    assert [h.target for h in found] == ["node1", "alice@node2", "gpu01", "gpu02", "gpu03"]
    assert found[1].port == 2222 and found[1].slots == 4
    assert found[2].origin == f"{path}:5"


def test_nodeset_expression_and_slurm_nodelist() -> None:
    assert [h.name for h in hosts.resolve("gpu[01-02],login1")] == ["gpu01", "gpu02", "login1"]
    env = {"SLURM_JOB_NODELIST": "node[1-3]"}
    assert [h.name for h in hosts.resolve(None, env)] == ["node1", "node2", "node3"]
    with pytest.raises(InputError, match="no hosts"):
        hosts.resolve(None, {})


def test_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("a\nb\n"))
    assert [h.name for h in hosts.resolve("-")] == ["a", "b"]


HOSTILE = [
    "-oProxyCommand=touch /tmp/pwned",
    "node1;touch x",
    "$(touch x)",
    "`touch x`",
    "node 1",
    "node'1",
    'node"1',
    "../etc",
    "..",
    "a/b",
    "node\x07",
    "node|x",
    "-F",
    "node[1-2];x",
    "-node[1-2]",
]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_are_rejected_with_file_and_line(tmp_path: Path, name: str) -> None:
    path = tmp_path / "hosts.txt"
    path.write_text(f"good1\n{name}\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        hosts.resolve(str(path))
    message = str(info.value)
    assert message.startswith(f"{path}:2: ") and "\n" not in message


def test_newline_in_a_nodeset_argument() -> None:
    with pytest.raises(InputError):
        hosts.resolve("node1\n-oProxyCommand=x")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("node1:0", "bad port"),
        ("node1:99999", "bad port"),
        ("bad user@node1", "unexpected"),
        ("r;m@node1", "bad user name"),
        ("node1 slots=x", "unexpected"),
        ("node1 slots=0", "at least 1"),
        ("node[1-", "bad node set"),
    ],
)
def test_bad_lines(tmp_path: Path, line: str, expected: str) -> None:
    path = tmp_path / "hosts.txt"
    path.write_text(line + "\n")
    with pytest.raises(InputError, match=expected):
        hosts.resolve(str(path))


def test_duplicates_and_empty(tmp_path: Path) -> None:
    path = tmp_path / "hosts.txt"
    path.write_text("a\nb\na\n")
    with pytest.raises(InputError, match=r"hosts.txt:3: host a already listed at .*hosts.txt:1"):
        hosts.resolve(str(path))
    path.write_text("# nothing\n")
    with pytest.raises(InputError, match="no hosts listed"):
        hosts.resolve(str(path))
    with pytest.raises(InputError, match="no such hosts file"):
        hosts.resolve(str(tmp_path / "nope" / "hosts.txt"))


def test_a_huge_node_set_is_refused_before_it_is_expanded() -> None:
    import time

    start = time.monotonic()
    with pytest.raises(InputError, match=r"names 100000000 hosts \(max 100000\)"):
        hosts.resolve("n[1-100000000]")
    assert time.monotonic() - start < 2


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        ("node[1-10/2]", ["node1", "node3", "node5", "node7", "node9"]),  # a step range
        ("gpu[01-20/5]", ["gpu01", "gpu06", "gpu11", "gpu16"]),
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),  # several bracket groups
        ("root@n[1-2]", ["root@n1", "root@n2"]),
    ],
)
def test_what_clustershell_accepts_is_accepted(spec: str, names: list[str]) -> None:
    assert [h.target for h in hosts.resolve(spec)] == names


def test_a_step_range_is_capped_before_it_is_expanded() -> None:
    with pytest.raises(InputError, match="names 50000000 hosts"):
        hosts.resolve("n[1-100000000/2]")


def test_a_slash_outside_brackets_is_a_path_or_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such hosts file"):
        hosts.resolve(str(tmp_path / "no-such-hosts.txt"))
    with pytest.raises(InputError, match="contains '/'"):
        hosts.parse_text("n[1-3]/x\n", "hosts.txt")


def _groups(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh python whose ClusterShell reads tmp_path's groups.conf (the group
    configuration is read when ClusterShell is imported)."""
    conf = tmp_path / "cs"
    (conf / "groups.d").mkdir(parents=True)
    (conf / "groups.conf").write_text("[Main]\ndefault: lab\ngroups_dir: $CFGDIR/groups.d\n")
    (conf / "groups.d" / "lab.yaml").write_text(
        "lab:\n  gpu: 'gpu[01-03]'\n  huge: 'n[1-200000]'\n"
    )
    env = {**os.environ, "CLUSTERSHELL_CFGDIR": str(conf)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=60, check=False)  # fmt: skip


def test_a_node_group_resolves_through_the_group_sources(tmp_path: Path) -> None:
    code = (
        "from envtool.cluster import hosts\n"
        "print(' '.join(h.target for h in hosts.resolve('@gpu')))\n"
        "print(' '.join(h.target for h in hosts.resolve('admin@@lab:gpu')))\n"
        "for spec in ('@nosuch', '@huge'):\n"
        "    try:\n"
        "        hosts.resolve(spec)\n"
        "    except Exception as exc:\n"
        "        print(type(exc).__name__, exc)\n"
    )
    out = _groups(tmp_path, code)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "gpu01 gpu02 gpu03"
    assert lines[1] == "admin@gpu01 admin@gpu02 admin@gpu03"
    assert lines[2].startswith("InputError") and "'@nosuch' is not defined" in lines[2]
    assert lines[3].startswith("InputError") and "names 200000 hosts (max 100000)" in lines[3]


def test_a_long_fragmented_node_set_is_parsed_before_any_file_lookup() -> None:
    # 349 characters: Path.is_file raised ENAMETOOLONG, "internal error", exit 3
    spec = "gpu[" + ",".join(str(i) for i in range(1, 200, 2)) + "]"
    assert [h.name for h in hosts.resolve(spec)] == [f"gpu{i}" for i in range(1, 200, 2)]
    names = [f"node{i}" for i in range(100)]
    assert [h.name for h in hosts.resolve(",".join(names))] == names


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("n[1-" + "9" * 5000 + "]", "bad node set 'n[1-999"),  # int() refuses 4,300 digits
        ("n[" + "9" * 5000 + "]", "a range bound of more than 18 digits"),
        ("n[1]" * 9, "more than 8 bracket groups"),
        ("a" * 300, "bad host name 'aaa"),
        ("gpu[" + ",".join(map(str, range(100))) + "]/x", "no such hosts file"),
    ],
)
def test_over_long_specs_and_huge_bounds_are_one_line_errors(spec: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        hosts.resolve(spec)
    text = str(caught.value)
    assert message in text and len(text) < 300 and "\n" not in text


def test_a_name_ending_in_digits_before_a_bracket_keeps_them_as_its_prefix() -> None:
    # Slurm's FAQ runs 100 slurmd as NodeName=dummy26[1-100]: dummy261 ... dummy26100
    names = [h.name for h in hosts.resolve("dummy26[1-100]")]
    assert len(names) == 100 and names[0] == "dummy261" and names[-1] == "dummy26100"
    from ClusterShell.NodeSet import NodeSet

    assert len(NodeSet("dummy26[1-100]")) == 25_840  # what envtool read before issue 25
    assert [h.name for h in hosts.resolve("gpu1[8-12]")] == [
        "gpu18", "gpu19", "gpu110", "gpu111", "gpu112"
    ]  # fmt: skip
    env = {"SLURM_JOB_NODELIST": "dawn001[8-15]"}  # squeue output in Slurm's multi_cluster doc
    assert [h.name for h in hosts.resolve(None, env)][-2:] == ["dawn00114", "dawn00115"]


def test_a_hosts_file_line_with_such_a_node_list(tmp_path: Path) -> None:
    path = tmp_path / "hosts.txt"
    path.write_text("login1\nalice@gpu1[8-12]:2222 slots=8\n")
    found = hosts.resolve(str(path))
    assert [h.target for h in found] == ["login1"] + [f"alice@gpu1{i}" for i in (8, 9, 10, 11, 12)]
    assert {(h.port, h.slots, h.origin) for h in found[1:]} == {(2222, 8, f"{path}:2")}


@pytest.mark.parametrize(
    ("spec", "names"),
    [
        ("n[01-9]", [f"n0{i}" for i in range(1, 10)]),  # the low bound's width (was refused)
        ("n[1-010]", [f"n{i}" for i in range(1, 11)]),
        ("n[005,4,11-13]", ["n005", "n4", "n11", "n12", "n13"]),  # each range its own width
        ("login1,gpu[01-02]", ["login1", "gpu01", "gpu02"]),  # in the order written
        ("tux[2,1-2]", ["tux2", "tux1"]),  # each name once
        ("a[1-2]b[1-2]c[1-2]", ["a1b1c1", "a1b1c2", "a2b1c1", "a2b1c2",
                                "a1b2c1", "a1b2c2", "a2b2c1", "a2b2c2"]),  # Slurm's nesting
        ("gpu1[8-9]-ib", ["gpu18-ib", "gpu19-ib"]),  # text after the bracket (Slurm 23.02.5)
        ("a[1-2],,b", ["a1", "a2", "b"]),
    ],
)  # fmt: skip
def test_widths_order_and_groups_as_slurm_reads_them(spec: str, names: list[str]) -> None:
    assert [h.name for h in hosts.resolve(spec)] == names


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpu1[8-12/2]", "'gpu1[8-12/2]' is read two ways: ClusterShell takes a digit"),
        ("login1,gpu1[1-9/2]", ": 'gpu1[1-9/2]' is read two ways"),  # the item named
        ("n[01-9/2]", "read two ways: ClusterShell refuses it: 'bad range"),
        ("n99999999[1-10/2]", "read two ways"),  # ClusterShell: 4.5 billion names
    ],
)
def test_a_step_range_read_two_ways_is_refused_by_name(spec: str, message: str) -> None:
    import time

    start = time.monotonic()
    with pytest.raises(InputError) as caught:
        hosts.resolve(spec)
    text = str(caught.value)
    assert message in text and "without a step" in text and "\n" not in text
    assert len(text) < 300 and time.monotonic() - start < 5


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("dummy26[1-100000000]", "names 100000000 hosts (max 100000)"),
        ("n[1-]", "'1-' is not a number or a range"),  # Slurm reads n1; a typo, surely
        ("n[1a-3]", "'1a-3' is not a number or a range"),  # Slurm reads n01 n02 n03
        ("n[3-1]", "the range '3-1' runs backwards"),
        ("a[[1-2]", "brackets that do not pair up"),
        ("n[1-5/0]", "a step of 0"),
    ],
)
def test_what_slurm_would_misread_or_refuse_is_one_line(spec: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        hosts.resolve(spec)
    text = str(caught.value)
    assert message in text and text.startswith("--hosts:1: ") and "\n" not in text


@pytest.mark.parametrize("spec", ["hosts-typo.txt", "cluster.hosts", "nodes.list", "Hosts.TXT"])
def test_a_missing_file_by_its_name_is_no_such_file_not_a_host(spec: str) -> None:
    """``--hosts hosts-typo.txt`` was one host called that (unreachable, after the connect
    timeout); a name that ends like a file's is a missing file, exit 2, at once."""
    with pytest.raises(InputError, match=f"^'{re.escape(spec)}': no such hosts file$"):
        hosts.resolve(spec)


def test_a_host_name_with_dots_is_still_a_host() -> None:
    assert [h.name for h in hosts.resolve("node1.cluster.local")] == ["node1.cluster.local"]


def test_a_device_given_as_hosts_file_is_refused_as_a_device() -> None:
    with pytest.raises(InputError, match=r"^/dev/zero: hosts file is a device, not a file$"):
        hosts.resolve("/dev/zero")


def test_one_host_on_two_ports_is_two_nodes_and_keeps_its_ports(tmp_path: Path) -> None:
    """Two sshd on one machine, each its own port: two nodes, named with their ports in every
    report (the port was dropped, and the second line refused as a duplicate)."""
    listed = tmp_path / "hosts.txt"
    listed.write_text("node1:2222\nbob@node1:2223\nnode1:2222 slots=2\n")
    with pytest.raises(InputError, match=r"hosts.txt:3: host node1:2222 already listed at .*:1"):
        hosts.resolve(str(listed))
    listed.write_text("node1:2222\nbob@node1:2223\n")
    found = hosts.resolve(str(listed))
    assert [(h.target, h.port, h.label) for h in found] == [
        ("node1", 2222, "node1:2222"),
        ("bob@node1", 2223, "bob@node1:2223"),
    ]


def test_the_report_names_each_port(tmp_path: Path) -> None:
    argv = [str(Path(sys.executable).parent / "envtool"), "verify", "--transport", "local",
            "--hosts", "localhost:2201,localhost:2202", "--no-lock", "--format",
            "json"]  # fmt: skip
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    import json

    assert [h["host"] for h in json.loads(run.stdout)["hosts"]] == [
        "localhost:2201",
        "localhost:2202",
    ]


def test_a_port_of_non_ascii_digits_is_a_bad_port_not_a_traceback(tmp_path: Path) -> None:
    """Hypothesis found ``host:²`` (str.isdigit says yes to '²', int() raised ValueError)."""
    path = tmp_path / "hosts.txt"
    path.write_text("node1:\u00b2\n")
    with pytest.raises(InputError, match="bad port"):
        hosts.resolve(str(path))
