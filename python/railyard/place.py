"""Topology-aware gang placement: all or nothing, fewest leaf switches, ranks in leaf order
(place/placement.h; docs/placement.md).

    import railyard.place as place
    p = place.place(topology, nodes=16, gpus_per_node=8, exclude=["gpu007"])
    p.hosts        # rank order: rank i runs on p.hosts[i]
"""

from dataclasses import dataclass

from railyard import _core

__all__ = ["Placement", "Placer", "place"]


@dataclass(frozen=True)
class Placement:
    job_id: int  # 0 from place(); a Placer numbers its jobs from 1
    hosts: tuple  # rank order
    leaves: tuple  # leaf switches used, in rank order
    levels: dict  # level name -> number of its domains used
    explanation: str  # "placed 16 nodes in spine2 (level spine) on 2 leaves"


def _placement(d):
    return Placement(d["job_id"], tuple(d["hosts"]), tuple(d["leaves"]), d["levels"], d["explanation"])


class Placer:
    """A sequence of placements and releases on one topology (place::Placer)."""

    def __init__(self, topology, *, exclude=(), busy=()):
        self.topology = topology
        self._core = _core.Placer(topology._core)
        self.set_excluded(exclude)
        self.set_busy(busy)

    def set_excluded(self, hosts):
        """Replaces the excluded hosts (unhealthy: never offered). NotFoundError naming an
        unknown host."""
        self._core.set_excluded(list(hosts))

    def set_busy(self, hosts):
        """Replaces the busy hosts (in use outside this Placer)."""
        self._core.set_busy(list(hosts))

    def place(self, nodes, *, gpus_per_node=0, required_level="", preferred_level=""):
        """Places a job of ``nodes`` whole nodes and allocates them. ResourceExhaustedError
        with the reason when it does not fit now; ValueError for an impossible request."""
        return _placement(self._core.place(nodes, gpus_per_node, required_level, preferred_level))

    def release(self, placement):
        """Frees a job's nodes (a Placement or its job id)."""
        self._core.release(placement if isinstance(placement, int) else placement.job_id)

    free_nodes = property(lambda self: self._core.free_nodes)
    live_jobs = property(lambda self: self._core.live_jobs)


def place(topology, nodes, *, gpus_per_node=0, exclude=(), busy=(), required_level="", preferred_level=""):
    """One placement on ``topology`` avoiding the hosts in ``exclude`` and ``busy``."""
    placer = Placer(topology, exclude=exclude, busy=busy)
    p = placer.place(
        nodes, gpus_per_node=gpus_per_node, required_level=required_level, preferred_level=preferred_level
    )
    return Placement(0, p.hosts, p.leaves, p.levels, p.explanation)
