"""railyard.topology and railyard.place: every input format loads, every export is the text
`railyard topo export` writes for the same file, and placement honours exclusions."""

import os
import subprocess

import pytest

import railyard
import railyard.place as place
import railyard.topology as topology

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TESTDATA = os.path.join(ROOT, "src", "railyard", "topo", "testdata")
BINARY = os.environ.get("RAILYARD_BINARY")
SIMPLE_FORMATS = ["railyard-yaml", "slurm-conf", "slurm-yaml", "k8s-labels", "k8s-labels-json",
                  "kueue", "hostfile"]
INPUTS = {
    "railyard_explicit.yaml": "Railyard topology YAML",
    "slurm_tree.conf": "Slurm topology.conf",
    "slurm_block.conf": "Slurm topology.conf (blocks)",
    "slurm_topology.yaml": "Slurm topology.yaml",
}


def data(name):
    return os.path.join(TESTDATA, name)


def cli_export(*args):
    if not BINARY:
        pytest.fail("RAILYARD_BINARY is not set (ctest sets it to the built railyard binary)")
    out = subprocess.run([BINARY, "topo", "export", *args], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_every_format_loads_and_exports_as_the_cli_does(name):
    t = topology.load(data(name))
    assert t.nodes and t.levels
    for fmt in SIMPLE_FORMATS:
        assert t.export(fmt) == cli_export("--topology", data(name), "--format", fmt), fmt
    assert t.export("kueue", name="train-a", api="v1beta1") == cli_export(
        "--topology", data(name), "--format", "kueue", "--name", "train-a", "--kueue-api", "v1beta1")
    assert t.export("hostfile", slots=3) == cli_export(
        "--topology", data(name), "--format", "hostfile", "--slots", "3")


def test_nccl_xml_for_one_node_as_the_cli_writes_it():
    t = topology.load(data("railyard_explicit.yaml"))
    xml = t.export("nccl-xml", node="node0", cpu=("x86_64", "GenuineIntel", 6, 143),
                   pcie_link_speed="16.0 GT/s PCIe", pcie_link_width=8)
    assert xml == cli_export("--topology", data("railyard_explicit.yaml"), "--format", "nccl-xml",
                             "--node", "node0", "--nccl-cpu", "x86_64,GenuineIntel,6,143",
                             "--pcie-link", "16.0 GT/s PCIe,8")
    with pytest.raises(FileNotFoundError, match="'node9' is not in the topology"):
        t.export("nccl-xml", node="node9", cpu=("arm64",))
    with pytest.raises(ValueError, match="arch"):
        t.export("nccl-xml", node="node0", cpu=("sparc",))


def test_aws_instance_topology_with_and_without_host_names():
    by_id = topology.load(data("aws_page.json"))
    assert all(n.name.startswith("i-") for n in by_id.nodes)
    t = topology.load_aws(data("aws_page.json"), hosts=data("aws_hosts.txt"))
    assert all(n.name.startswith("ip-") for n in t.nodes)
    for fmt in ("slurm-conf", "k8s-labels", "hostfile"):
        assert t.export(fmt) == cli_export("--topology", data("aws_page.json"), "--aws-hosts",
                                           data("aws_hosts.txt"), "--format", fmt), fmt
    mapping = {n.name: f"host{i}" for i, n in enumerate(by_id.nodes)}
    assert [n.name for n in topology.load_aws(data("aws_page.json"), mapping).nodes] == [
        mapping[n.name] for n in by_id.nodes]


def test_model_and_render():
    t = topology.load(data("railyard_explicit.yaml"))
    assert t.name == "lab" and t.levels == ("spine", "leaf") and t.block_sizes == (2, 4)
    assert [(n.name, n.leaf, n.gpu_count) for n in t.nodes] == [
        ("node0", "leaf0", 2), ("node1", "leaf0", 4), ("node2", "leaf1", 2), ("node3", "leaf1", 0)]
    assert t.nodes[0].address == "10.0.0.1" and t.nodes[0].link_rate_bits == 100 * 10**9
    switches = {s.name: s for s in t.switches}
    assert switches["leaf1"].parent == "spine0" and switches["spine0"].parent is None
    assert switches["leaf1"].nodes == ["node2", "node3"] and switches["leaf1"].level == "leaf"
    assert t.total_gpus == 8 and t.render().startswith("lab\n")


def test_bad_input_names_the_file_and_what_was_expected():
    with pytest.raises(ValueError, match="load_garbage.bin"):
        topology.load(data("load_garbage.bin"))
    with pytest.raises(FileNotFoundError, match="nope.yaml"):
        topology.load(data("nope.yaml"))
    with pytest.raises(ValueError, match="<mine>"):
        topology.parse("version: 2\nlevels: [leaf]\nswitches: [{name: s}]\n", "<mine>")
    with pytest.raises(ValueError, match="expected one of railyard-yaml"):
        topology.load(data("slurm_tree.conf")).export("csv")
    with pytest.raises(TypeError):
        topology.load(data("slurm_tree.conf")).export("hostfile", node="x")


def test_placement_avoids_excluded_hosts():
    t = topology.load(os.path.join(ROOT, "examples", "topology-2su-rail.yaml"))
    p = place.place(t, 4, gpus_per_node=8)
    assert len(p.hosts) == 4 and len(set(p.leaves)) == 1 and p.job_id == 0
    assert "placed 4 nodes" in p.explanation
    avoided = place.place(t, 4, gpus_per_node=8, exclude=[p.hosts[1]])
    assert p.hosts[1] not in avoided.hosts and len(set(avoided.leaves)) == 1
    with pytest.raises(FileNotFoundError, match="no-such-host"):
        place.place(t, 4, exclude=["no-such-host"])
    with pytest.raises(ValueError, match="level"):
        place.place(t, 4, required_level="row")


def test_a_placer_allocates_until_the_cluster_is_full():
    t = topology.load(os.path.join(ROOT, "examples", "topology-2su-rail.yaml"))
    placer = place.Placer(t, exclude=[t.nodes[0].name])
    total = len(t.nodes)
    jobs = [placer.place(4, required_level="spine") for _ in range(3)]
    assert [j.job_id for j in jobs] == [1, 2, 3] and placer.free_nodes == total - 1 - 12
    assert not set(jobs[0].hosts) & set(jobs[1].hosts)
    with pytest.raises(railyard.ResourceExhaustedError, match="free"):
        placer.place(total - 12, required_level="spine")
    placer.release(jobs[0])
    assert placer.live_jobs == 2 and placer.free_nodes == total - 1 - 8
    with pytest.raises(FileNotFoundError):
        placer.release(jobs[0])
