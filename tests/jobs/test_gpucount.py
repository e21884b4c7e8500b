"""A job's GPU count and where it comes from (apps.jobs.gpucount, plain Python)."""
from apps.jobs.gpucount import gpu_count


def test_slurm_s_count_wins_and_zero_is_a_count():
    found = gpu_count(16, tres=["gres/gpu=8"], node_gpus=4, telemetry_gpus=2)
    assert (found.count, found.source) == (16, "slurm")
    assert (gpu_count(0, node_gpus=16).count, gpu_count(0, node_gpus=16).source) == (0, "slurm")  # a CPU job


def test_then_tres_then_the_topology_then_telemetry_then_unknown():
    def pair(**kwargs):
        found = gpu_count(None, **kwargs)
        return found.count, found.source

    assert pair(tres=[None, "cpu=288,mem=4T,node=4,billing=288,gres/gpu=16"], node_gpus=8) == (16, "tres")
    assert pair(tres=["cpu=288,gres/gpu:gh200=12"]) == (12, "tres")
    assert pair(tres=["cpu=288,node=4"], node_gpus=16, telemetry_gpus=15) == (16, "topology")
    assert pair(node_gpus=0, telemetry_gpus=15) == (15, "telemetry")
    assert pair() == (None, "unknown")
