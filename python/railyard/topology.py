"""Cluster topologies: load one in any format Railyard reads, export it as
``railyard topo export`` does (topo/load.h and the exporters; docs/topology.md).

    import railyard.topology as topology
    t = topology.load("cluster.yaml")        # Railyard YAML, Slurm topology.conf/.yaml, AWS JSON
    t = topology.load_aws("aws.json", hosts="hosts.txt")   # AWS nodes by host name
    print(t.render())                        # the tree `railyard topo show` prints
    conf = t.export("slurm-conf")
    kueue = t.export("kueue", name="train-a", api="v1beta2")
    xml = t.export("nccl-xml", node="gpu001", cpu=("x86_64", "GenuineIntel", 6, 143))
"""

import os
from collections import namedtuple

from railyard import _core

__all__ = ["FORMATS", "Node", "Switch", "Topology", "load", "load_aws", "parse"]

Node = namedtuple("Node", "name address gpu_count link_rate_bits leaf")
Switch = namedtuple("Switch", "name level parent nodes")


def _kueue(c, *, name="railyard", api="v1beta2"):
    return c.kueue(name, api)


def _hostfile(c, *, slots=0):
    return c.hostfile(slots)


def _nccl_xml(c, *, node, cpu=None, pcie_link_speed="", pcie_link_width=0):
    # cpu: (arch,) or (arch, vendor, family, model) as cpuid gives them; None: this host's.
    arch, vendor, family, model = "", "", -1, -1
    if cpu is not None:
        arch, vendor, family, model = (tuple(cpu) + ("", -1, -1))[:4]
    return c.nccl_xml(node, arch, vendor, family, model, pcie_link_speed, pcie_link_width)


# The formats of `railyard topo export --format`, each with its options.
_EXPORTS = {
    "railyard-yaml": lambda c: c.railyard_yaml(),
    "slurm-conf": lambda c: c.slurm_conf(),
    "slurm-yaml": lambda c: c.slurm_yaml(),
    "k8s-labels": lambda c: c.k8s_labels(),
    "k8s-labels-json": lambda c: c.k8s_labels_json(),
    "kueue": _kueue,
    "nccl-xml": _nccl_xml,
    "hostfile": _hostfile,
}
FORMATS = tuple(_EXPORTS)


class Topology:
    """A cluster: levels (top first), switches, nodes. Immutable. ``skipped``: the AWS
    instances load_aws left out (not running, or a type without instance topology)."""

    def __init__(self, core, skipped=()):
        self._core = core
        self.skipped = tuple(skipped)

    name = property(lambda self: self._core.name)
    levels = property(lambda self: tuple(self._core.levels))
    block_sizes = property(lambda self: tuple(self._core.block_sizes))
    total_gpus = property(lambda self: self._core.total_gpus)

    @property
    def nodes(self):
        return [Node(**n) for n in self._core.nodes()]

    @property
    def switches(self):
        return [Switch(**s) for s in self._core.switches()]

    def render(self):
        """The tree `railyard topo show` prints."""
        return self._core.render()

    def export(self, format, **options):  # noqa: A002 (the CLI's --format)
        """The text `railyard topo export --format FORMAT` writes. Options: kueue takes
        name= and api=, hostfile slots=, nccl-xml node= (required), cpu=, pcie_link_speed=
        and pcie_link_width=."""
        export = _EXPORTS.get(format)
        if export is None:
            raise ValueError(f"format '{format}': expected one of {', '.join(FORMATS)}")
        return export(self._core, **options)

    def __repr__(self):
        return (
            f"Topology('{self.name}', levels={list(self.levels)}, "
            f"nodes={len(self._core.nodes())}, gpus={self.total_gpus})"
        )


def load(path):
    """Reads a topology file, its format recognised by its content."""
    return Topology(_core.Topology.load(os.fspath(path)))


def load_aws(path, hosts=None):
    """AWS instance topology JSON (`aws ec2 describe-instance-topology`) with its nodes named
    by ``hosts``: a dict of instance id -> host name, or the path of a file of
    "<instance-id> <host-name>" lines (`railyard topo export --aws-hosts`). Without hosts
    the nodes keep their instance ids, as load() gives them."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        text = f.read()
    source = ""
    if hosts is not None and not isinstance(hosts, dict):
        source = os.fspath(hosts)
        with open(source, "rb") as f:
            hosts = _core.parse_aws_host_map(f.read(), source)
    core, skipped = _core.import_aws(text, path, hosts, source)
    return Topology(core, skipped)


def parse(text, source="<text>"):
    """Parses topology text; ``source`` prefixes every error."""
    return Topology(_core.Topology.parse(text, source))
