"""The rows of the findings table (rules.py) about the network and the limits under the
environment. Same columns as rules.py: check, severity, lenient; cause; fix line; docs' fix; what it
explains away."""

from __future__ import annotations

from envtool.judge.kinds import Check, Kind, Rule, Severity

# fmt: off
NETWORK_RULES: dict[Kind, Rule] = {
    # interfaces and InfiniBand (judge/network.py)
    Kind.IFNAME_UNMATCHED: Rule(
        Check.NETWORK, Severity.ERROR, None,
        "`NCCL_SOCKET_IFNAME` selects no interface of the node that is up with an address "
        "(read with NCCL's syntax: prefixes, `=` whole names, `^` to exclude), or "
        "`GLOO_SOCKET_IFNAME` (whole names) names one it lacks: NCCL fails with \"no socket "
        "interface found\", gloo cannot create its device. A variable wrong the same way "
        "everywhere is one finding listing its nodes; it explains that node's "
        "`allreduce-failed` and its `nccl-env-differs` about that variable",
        "",
        "set it to the interface that carries the nodes' traffic (`ip -br addr`), or unset it",
        frozenset({Kind.ALLREDUCE_FAILED}),
    ),
    Kind.GLOO_LOOPBACK: Rule(
        Check.NETWORK, Severity.ERROR, Severity.WARNING,
        "`GLOO_SOCKET_IFNAME` is unset and the node's hostname resolves to a loopback address "
        "(Debian writes `127.0.1.1 <hostname>` into /etc/hosts): gloo's own pick is then `lo` "
        "(torch warns \"Unable to resolve hostname to a (local) address\") and the other "
        "nodes cannot reach its gloo pairs. Said only where another node does not share that "
        "loopback (another boot, or another network namespace). An error on a node without "
        "GPUs (gloo is what DDP uses there), a warning beside NCCL (only gloo groups fail)",
        "set GLOO_SOCKET_IFNAME to the interface that carries the nodes' traffic, or map the "
        "hostname to the node's real address in /etc/hosts",
        "set `GLOO_SOCKET_IFNAME`, or give the hostname its real address in /etc/hosts",
    ),
    Kind.MTU_DIFFERS: Rule(
        Check.NETWORK, Severity.WARNING, None,
        "the MTU of the interface NCCL (else gloo) selects differs from the other nodes': "
        "jumbo frames on some nodes only stall or fragment large messages",
        "make the MTU of {subject} the same on every node (ip link set DEV mtu N)",
        "set one MTU on every node and switch port (`ip link set DEV mtu N`)",
    ),
    Kind.LINK_SPEED_DIFFERS: Rule(
        Check.NETWORK, Severity.WARNING, None,
        "the link speed of the interface NCCL (else gloo) selects differs from the other "
        "nodes' (`/sys/class/net/DEV/speed`; virtual links that report none are left out): "
        "a port that negotiated down sets the pace of every collective",
        "check {subject} on that node: cable, switch port, autonegotiation (ethtool DEV)",
        "check the cable, switch port and autonegotiation (`ethtool DEV`)",
    ),
    Kind.IB_PORT_DOWN: Rule(
        Check.NETWORK, Severity.ERROR, None,
        "an InfiniBand/RoCE port NCCL would use (all, or those `NCCL_IB_HCA` selects: "
        "prefixes, `=` whole names, `^` to exclude, `:port`) is not `ACTIVE` / `LinkUp` "
        "(`/sys/class/infiniband/DEV/ports/N/state`, `phys_state`, read in any form they are "
        "written: `4: ACTIVE`, `ACTIVE`, `4`; a `phys_state` that says `ACTIVE` is up): NCCL "
        "skips it without a word and runs on fewer rails, or on sockets where none is left. A "
        "port switched off (`phys_state` `Disabled`: `ibportstate ... disable`; on RoCE, its "
        "netdev down or without carrier) is an error only where NCCL would select it: an "
        "`NCCL_IB_HCA` list names it, or no other port NCCL would use on the node is up. "
        "Elsewhere it is info, not an error (the node's other ports carry NCCL; a spare port "
        "switched off is an admin's choice), and a port a `^` list leaves out is not judged",
        "bring port {subject} up (cable, switch port, subnet manager: ibstat), or leave it "
        "out of NCCL_IB_HCA",
        "check the cable, switch port and subnet manager (`ibstat`); a port switched off: "
        "enable it (`ibportstate`; RoCE: `ip link set NETDEV up`); or exclude the port in "
        "`NCCL_IB_HCA` (`^=mlx5_1:1`)",
    ),
    Kind.IB_RATE_DIFFERS: Rule(
        Check.NETWORK, Severity.WARNING, None,
        "an InfiniBand/RoCE port's rate differs from the same port's on the other nodes (a "
        "link trained at a lower speed or width)",
        "check port {subject} on that node: cable, switch port (ibstat, ibportstate)",
        "check the cable and switch port (`ibstat`); reseat or replace the cable",
    ),
    Kind.IB_HCA_MISSING: Rule(
        Check.NETWORK, Severity.ERROR, None,
        "`NCCL_IB_HCA` (read with NCCL's syntax: `mlx5_0:1,mlx5_1`, `=` whole names, `^` to "
        "exclude) names a device or port the node does not have: NCCL uses fewer rails than "
        "meant, or falls back to sockets",
        "set NCCL_IB_HCA to devices the node has (ls /sys/class/infiniband), or unset it",
        "name the devices the node has (`ls /sys/class/infiniband`), or unset it",
    ),
    Kind.PEERMEM_MISSING: Rule(
        Check.NETWORK, Severity.WARNING, None,
        "a node with InfiniBand and GPUs has no GPUDirect RDMA module loaded (`nvidia_peermem`, "
        "or the older `nv_peer_mem`): NCCL copies through host memory, at a fraction of the "
        "bandwidth",
        "modprobe nvidia_peermem (and load it at boot)",
        "`modprobe nvidia_peermem`, and add it to `/etc/modules-load.d/`",
    ),
    # the rendezvous from every node (judge/rendezvous.py); across nodes each explains the
    # run's allreduce-failed (rendezvous.explain_cluster: not per node, not pair by pair)
    Kind.RDZV_UNRESOLVABLE: Rule(
        Check.NETWORK, Severity.ERROR, None,
        "the rendezvous host (`--rdzv-endpoint`, else `MASTER_ADDR`, else the first host) does "
        "not resolve on a node (its getaddrinfo, bounded to 5 s); with `--allreduce cluster` "
        "it explains the run's `allreduce-failed`",
        "make {subject} resolve on that node (DNS or /etc/hosts), or give --rdzv-endpoint an "
        "address",
        "make the name resolve on every node, or use `--rdzv-endpoint ADDRESS:PORT`",
    ),
    Kind.RDZV_LOOPBACK: Rule(
        Check.NETWORK, Severity.ERROR, None,
        "the rendezvous host resolves to a loopback address (127.0.0.0/8, ::1) on a node, the "
        "store's own node included (Debian's `127.0.1.1 <hostname>` line in /etc/hosts): "
        "torchrun's store listens on loopback and the other nodes time out. Not said when "
        "every node resolves one same loopback address and reached it there (nodes of one "
        "machine); with `--allreduce cluster` it explains the run's `allreduce-failed`",
        "map {subject} to the node's real address in /etc/hosts (not 127.0.1.1), or use "
        "--rdzv-endpoint ADDRESS:PORT",
        "replace the line `127.0.1.1 <name>` in /etc/hosts by the node's real address, or use "
        "`--rdzv-endpoint ADDRESS:PORT`",
    ),
    Kind.RDZV_ADDRESS_DIFFERS: Rule(
        Check.NETWORK, Severity.ERROR, None,
        "the nodes resolve the rendezvous host to different addresses (a stale /etc/hosts, "
        "split DNS): some nodes would wait at another machine; with `--allreduce cluster` it "
        "explains the run's `allreduce-failed`",
        "make {subject} resolve to one address on every node",
        "make the name resolve to one address everywhere (DNS, /etc/hosts)",
    ),
    Kind.RDZV_UNREACHABLE: Rule(
        Check.NETWORK, Severity.ERROR, None,
        "a node could not open a TCP connection to the rendezvous port while envtool listened "
        "there, on the store's node, before any torch process (3 s a try, retried until a "
        "window of 10 s or a third of `--timeout` closed): a firewall between the two "
        "(`DROP`: timed out; `REJECT`: refused). Names the node, the store's node and the "
        "port; with `--allreduce cluster` it explains the run's `allreduce-failed`, pair by "
        "pair the failed pair of those two nodes",
        "open TCP {subject} to these nodes (nftables/iptables, security group)",
        "open the rendezvous port to every node (firewall, security group)",
    ),
    Kind.RDZV_LATE: Rule(
        Check.NETWORK, Severity.WARNING, None,
        "a node's connects to the rendezvous port all came after envtool stopped listening "
        "on the store's node, or all before it began (on envtool's clock, each node's offset "
        "and its bound taken into account): one of the two started late (a slow ssh login, a "
        "python slow to start on a cold filesystem). The port was not checked from that "
        "node, which is said instead of `rendezvous-unreachable`; where the store's node was "
        "the late one, one finding names it",
        "find what delays that node's start (`time ssh NODE true`, the python's first import), "
        "then run verify again",
        "find what delays the node's start (ssh login, python's start), then verify again",
    ),
    Kind.RDZV_STRANGERS: Rule(
        Check.NETWORK, Severity.WARNING, None,
        "while envtool listened on the rendezvous port of the store's node, connections came "
        "that did not carry this run's token (each node gets it on its stdin, never in argv): "
        "another user's process, a port scanner, or a second check on the same port. They are "
        "counted and said, never taken for a node: a forged greeting cannot make a healthy "
        "node look unreachable. During the job they would reach torch's store",
        "see who connects to that port on the store's node (`ss -tnp`), or give the job "
        "another MASTER_PORT",
        "find who connects to the port (`ss -tnp` on the store's node), or move the job to "
        "another `MASTER_PORT`",
    ),
    # the limits under the environment (judge/limits.py; thresholds: LimitsPolicy, the
    # policy file's limits: section)
    Kind.SHM_SMALL: Rule(
        Check.LIMITS, Severity.ERROR, None,
        "`/dev/shm` on the node is smaller than the threshold (1 GiB unless the policy says "
        "otherwise): NCCL's SHM transport and DataLoader workers keep their buffers there and "
        "fail (`ncclShmOpen`, \"No space left on device\", a bus error). Docker gives a "
        "container 64 MiB unless told otherwise. `verify --image` starts the container with "
        "`--shm-size=1g` as a job would (`--docker-run-arg` changes it), and a /dev/shm the "
        "container runtime set is worded as the runtime's, with the docker run option that "
        "set it, not as the image's",
        "",
        "`docker run --shm-size=1g` or more (or `--ipc=host`; a running container must be "
        "recreated); on a host, a bigger tmpfs (`mount -o remount,size=8G /dev/shm`)",
    ),
    Kind.MEMLOCK_LOW: Rule(
        Check.LIMITS, Severity.ERROR, None,
        "the locked-memory limit (`ulimit -l`, soft) is not unlimited on a node whose network "
        "part shows InfiniBand/RoCE: RDMA pins NCCL's buffers and `ibv_reg_mr` fails. Nothing "
        "is said where the node has no IB device. `verify --image` starts the container with "
        "`--ulimit memlock=-1` (an engine that cannot grant it says so: the host is "
        "unreachable with runc's words and the fix)",
        "",
        "`memlock unlimited` in `/etc/security/limits.conf`, `LimitMEMLOCK=infinity` for "
        "slurmd or dockerd, `docker run --ulimit memlock=-1`",
    ),
    Kind.NOFILE_LOW: Rule(
        Check.LIMITS, Severity.WARNING, None,
        "the open-files limit (`ulimit -n`, soft) is below the threshold (8192 unless the "
        "policy says otherwise): DataLoader workers (torch's `file_descriptor` sharing keeps a "
        "descriptor per tensor in flight) and NCCL's sockets run out (\"Too many open files\")",
        "",
        "`ulimit -n 65536` in the job script (up to the hard limit), `nofile` in "
        "`/etc/security/limits.conf`, `docker run --ulimit nofile=65536:65536`",
    ),
    Kind.CLOCK_SKEW: Rule(
        Check.LIMITS, Severity.WARNING, None,
        "the node's clock differs from envtool's by more than the allowed skew (1 s unless the "
        "policy says otherwise) beyond what the round trip leaves unknown: the node printed "
        "its time between the transport's start plus its own run time and the answer's "
        "arrival, the offset is taken against the middle and the bound is half that span "
        "(one srun step's whole span for Slurm: a larger bound). Timeouts and logs compared "
        "across nodes mislead",
        "sync the node's clock (chronyc tracking, timedatectl)",
        "sync the clocks (chrony or NTP: `chronyc tracking`, `timedatectl`)",
    ),
    Kind.SYSTEM_DIFFERS: Rule(
        Check.LIMITS, Severity.INFO, None,
        "the kernel release or the glibc version differs from the other nodes' (a fact for "
        "the admin: drivers, RDMA stacks and wheels built for a newer glibc follow them)",
        "make {subject} the same on every node, if it should be",
        "install the same OS image on every node, if they should match",
    ),
}
# fmt: on
