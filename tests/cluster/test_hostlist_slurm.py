"""cluster/hostlist.py against Slurm itself: each node list expands to exactly what
``scontrol show hostnames`` prints (same names, same order, duplicates included), and
``--hosts`` / ``SLURM_JOB_NODELIST`` give those names once each.

``scontrol show hostnames`` needs a slurm.conf to read but no running daemon: the one
written here names a controller that is never started.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import require

from envtool.cluster import hostlist, hosts

# Node lists from Slurm's documentation (SchedMD/slurm, doc/), its man pages, and real
# sites' sinfo/squeue/scontrol output; each with where it was read.
DOCUMENTED = [
    "dummy26[1-100]",  # doc/html/faq.shtml: NodeName=dummy26[1-100] (multiple slurmd)
    "linux[0-64,128]",  # doc/html/quickstart_admin.shtml, node range expressions
    "lx[15,18,32-33]",  # doc/html/quickstart_admin.shtml
    "rack[0-63]_blade[0-41]",  # doc/html/quickstart_admin.shtml: two numeric ranges
    "tux[0,0,1,0,0]",  # doc/html/faq.shtml: srun -m arbitrary -w tux[0,0,1,0,0]
    "tux[0,0,0,0,1]",  # doc/html/faq.shtml
    "dawn001[8-15]",  # doc/html/multi_cluster.shtml: squeue -M dawn,dusk output
    "dawn001[16-23]",  # doc/html/multi_cluster.shtml
    "dusk000[0-15]",  # doc/html/multi_cluster.shtml
    "sun[000-003,007,010-013,017]",  # doc/html/reservations.shtml: scontrol show res
    "node[01-016]",  # doc/html/hres.shtml: licenses=natural(node[01-016])
    "nid[00001,00011-00012]",  # doc/html/heterogeneous_jobs.shtml: SLURM_JOB_NODELIST=
    "n1_[1-10]",  # doc/man/man5/helpers.conf.5
    "lx[0003-8000]",  # doc/html/overview.shtml
    "tux[0-3,12,18-20]",  # doc/html/topology.shtml
    "s[0-2,4-8,12]",  # doc/html/topology.shtml
    "node[00,03,25]",  # doc/html/troubleshoot.shtml: "Nodes node[00,03,25] not responding"
    "mcr[0-1151]",  # doc/html/quickstart_admin.shtml: NodeName=mcr[0-1151]
    "wnode0[1-2]",  # doc/html/reservations.shtml: sbatch -wnode0[1-2]
    "dev[0,5]",  # doc/man/man1/sinfo.1
    "adev[6,13,15]",  # doc/html/quickstart.shtml: sinfo output
    "linux[1-3,6]",  # slurm_hostlist_create(3), manpages.ubuntu.com
    "tux[0-5,12,20-25]",  # Slurm::Hostlist(3pm), manpages.ubuntu.com
    "node1,node[2-5,12]",  # Slurm::Hostlist(3pm)
    "rack[01-3]-node[01-2,5]",  # python-hostlist's example (gitlab.liu.se NSC nscutils)
    "node[001-426]",  # ARIS sinfo (doc.aris.grnet.gr/run)
    "m[01-48],f[01-16],a[02-03],a01",  # ARIS sinfo (doc25.aris.grnet.gr/run/resource_queue)
    # sinfo of a site, mattermodeling.stackexchange.com/questions/11259
    "bigmem[41-44],data[31-36],node[01-12,14-16,21-27,29-30]",
]

# Forms named in issue 25 and the ones where a width or a prefix digit decides.
TRICKY = [
    "gpu1[8-12]",  # ClusterShell: 95 names
    "lx[10-20,30]",
    "tux[2,1-2]",  # order as written, tux2 twice
    "rack[1-2]-node[01-02]",
    "a[1-2]b[1-2]c[1-2]",  # three groups: Slurm's nesting order
    "r[1-2]n[1-4]",
    "n[01-9]",  # pads to the low bound's width: n01..n09 (ClusterShell refuses it)
    "n[1-010]",  # no padding: the low bound is one digit
    "n[8-012]",
    "n[005,4,11-13]",  # each range its own width
    "n[00-10]",
    "x1[0-5]",
    "x9-[98-101]",
    "r0_[007]",
    "gpu1[8-12]0[1-2]",  # a digit after a bracket
    "a,b,a",
    "n[1-2],n[2-3]",
    "a[1-2],,b",
    "login1,gpu[01-02]",
]

# Text after the last bracket: Slurm reads it since 23.02.5 ("Extend hostlist to support
# suffix", SchedMD/slurm 0994b5f); older scontrol says "Invalid hostlist".
SUFFIXED = ["unit[0-31]rack", "gpu1[8-12]-ib", "n[1-2]-ib"]
SUFFIX_SINCE = (23, 2, 5)

CONF = """\
ClusterName=hostlist
SlurmctldHost=localhost(127.0.0.1)
AuthType=auth/none
CredType=cred/none
NodeName=node1 CPUs=1 State=UNKNOWN
PartitionName=debug Nodes=ALL
"""


class Scontrol:
    """``scontrol`` reading a slurm.conf of its own (SLURM_CONF)."""

    def __init__(self, conf: Path) -> None:
        self.env = {**os.environ, "SLURM_CONF": str(conf)}

    def hostnames(self, expr: str) -> list[str] | None:
        """``scontrol show hostnames EXPR`` → its names, or None where Slurm refuses EXPR."""
        out = self._run("show", "hostnames", expr)
        if "Invalid hostlist" in out.stdout + out.stderr:
            return None
        assert out.returncode == 0 and out.stdout, (expr, out.stderr)
        return out.stdout.split()

    def version(self) -> tuple[int, ...]:
        """``slurm-wlm 22.05.8`` → (22, 5, 8)."""
        text = self._run("--version").stdout
        found = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
        assert found, text
        return tuple(int(n) for n in found.groups())

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["scontrol", *args], capture_output=True, text=True,
                              env=self.env, timeout=30, check=False)  # fmt: skip


@pytest.fixture(scope="module")
def scontrol(tmp_path_factory: pytest.TempPathFactory) -> Scontrol:
    """This machine's scontrol (skipped where there is none; a failure under CI=true)."""
    require(shutil.which("scontrol") is not None, "scontrol is not installed (slurm-client)")
    conf = tmp_path_factory.mktemp("slurm") / "slurm.conf"
    conf.write_text(CONF)
    found = Scontrol(conf)
    assert found.hostnames("n[1-2]") == ["n1", "n2"], "scontrol show hostnames does not work"
    return found


def _expanded(expr: str) -> list[str]:
    """envtool's reading of ``expr`` before duplicates are dropped."""
    return [n for item in hostlist.top_level(expr) if item for n in _item(item)]


def _item(item: str) -> list[str]:
    return list(hostlist.expand(hostlist.parse(item)))


@pytest.mark.parametrize("expr", DOCUMENTED + TRICKY)
def test_each_node_list_expands_as_scontrol_show_hostnames(expr: str, scontrol: Scontrol) -> None:
    slurm = scontrol.hostnames(expr)
    assert slurm is not None, f"scontrol refuses {expr}"
    assert _expanded(expr) == slurm
    assert [h.name for h in hosts.resolve(expr)] == list(dict.fromkeys(slurm))
    env = {"SLURM_JOB_NODELIST": expr}
    assert [h.name for h in hosts.resolve(None, env)] == list(dict.fromkeys(slurm))


@pytest.mark.parametrize("expr", SUFFIXED)
def test_text_after_the_bracket_as_slurm_reads_it_since_23_02_5(
    expr: str, scontrol: Scontrol
) -> None:
    slurm = scontrol.hostnames(expr)
    if scontrol.version() < SUFFIX_SINCE:  # this scontrol predates the suffix: it refuses
        assert slurm is None
        prefix, _, rest = expr.partition("[")
        ranges, _, suffix = rest.partition("]")
        slurm = [name + suffix for name in scontrol.hostnames(f"{prefix}[{ranges}]") or []]
    assert _expanded(expr) == slurm and slurm


def test_a_grid_of_prefixes_widths_and_groups_matches_scontrol(
    scontrol: Scontrol,
) -> None:
    prefixes = ["n", "gpu1", "dawn001", "x9-", "r0_"]
    ranges = ["1-12", "01-9", "8-012", "005,4,11-13", "0", "98-101", "007", "2,1-2"]
    exprs = [f"{p}[{r}]" for p in prefixes for r in ranges]
    exprs += [f"{p}[{r}]{mid}[{t}]" for p in prefixes[:3] for r in ranges[:4]
              for mid in ("", "-n", "0") for t in ranges[3:6]]  # fmt: skip
    exprs += [f"a[{r}]b[{s}]c[{t}]" for r in ranges[:3] for s in ranges[3:5] for t in ranges[5:7]]
    differ = [e for e in exprs if _expanded(e) != scontrol.hostnames(e)]
    assert differ == [] and len(exprs) == 160
