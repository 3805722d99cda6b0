"""Several "hosts" on one machine for the multi-node tests: network namespaces joined by
veth pairs, and an agent script that Open MPI (plm_rsh_agent) or MPICH (-launcher-exec)
runs instead of ssh: it receives HOST COMMAND... and runs the command inside HOST's
namespace. The namespaces share the filesystem, so the same binary paths work everywhere.
Needs root and iproute2; `unavailable()` says why they cannot be made here."""
import os
import shutil
import subprocess

SUBNET = "10.77.0"
IFNAME = "lan0"  # the same name in every namespace, for GLOO_SOCKET_IFNAME


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def unavailable():
    """Why namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root to create network namespaces (ip netns add)"
    if not shutil.which("ip"):
        return "needs iproute2 (the ip command)"
    probe = f"ipxprobe{os.getpid()}"
    r = _ip("netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


class NetnsHosts:
    """Two or more namespaces with addresses SUBNET.1, SUBNET.2, ... on one bridge-less
    chain: host 0 has a veth pair to every other host (a star with host 0 in the middle
    would need routing, so there is one /24 per pair for n > 2: only n = 2 is used)."""

    def __init__(self, workdir, n=2):
        assert n == 2, "two hosts: one veth pair"
        tag = f"ipx{os.getpid() % 100000}"
        self.namespaces = [f"{tag}h{i}" for i in range(n)]
        self.addresses = [f"{SUBNET}.{i + 1}" for i in range(n)]
        self.agent = os.path.join(workdir, "netns-agent.sh")
        self._made = []
        try:
            for ns in self.namespaces:
                _ip("netns", "add", ns)
                self._made.append(ns)
                _ip("-n", ns, "link", "set", "lo", "up")
            ends = [f"{tag}v{i}" for i in range(n)]
            _ip("link", "add", ends[0], "type", "veth", "peer", "name", ends[1])
            for ns, end, addr in zip(self.namespaces, ends, self.addresses):
                _ip("link", "set", end, "netns", ns)
                _ip("-n", ns, "link", "set", end, "name", IFNAME)
                _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", IFNAME)
                _ip("-n", ns, "link", "set", IFNAME, "up")
        except BaseException:
            self.close()
            raise
        cases = "\n".join(f'  {a}) ns={ns} ;;' for a, ns in zip(self.addresses, self.namespaces))
        with open(self.agent, "w") as f:
            f.write(f"""#!/bin/sh
# Stands in for ssh: HOST COMMAND... runs COMMAND in HOST's network namespace.
host="$1"; shift
case "$host" in
{cases}
  *) echo "netns-agent: unknown host $host" >&2; exit 255 ;;
esac
exec ip netns exec "$ns" /bin/sh -c "$*"
""")
        os.chmod(self.agent, 0o755)

    def exec_prefix(self, i):
        return ["ip", "netns", "exec", self.namespaces[i]]

    def net_id(self, i):
        """The namespace's identity as /proc/self/ns/net shows it inside."""
        return subprocess.run([*self.exec_prefix(i), "readlink", "/proc/self/ns/net"], capture_output=True,
                              text=True, check=True).stdout.strip()

    def close(self):
        for ns in self._made:
            _ip("netns", "del", ns, check=False)
        self._made = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
