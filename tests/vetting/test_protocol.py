"""The vetnode protocol validator: every problem vetnode would swallow, at its line, with the fix."""
import textwrap

import pytest

from apps.vetting.protocol import parse_rate, parse_size, validate_protocol

ALPS = textwrap.dedent("""\
    name: alps-ml-vetting
    scheduler: slurm
    pip:
      index_url: https://jfrog.svc.cscs.ch/artifactory/api/pypi/pypi-remote/simple
    evals:
      - name: gpu idle
        type: vetnode.evaluations.gpu_eval.GPUEval
        max_temp: 30
        max_used_memory: 0.2
      - name: cuda saxpy
        type: vetnode.evaluations.cuda_eval.CUDAEval
        cuda_home: /usr/local/cuda
        requirements: ["cuda-python==12.*", "numpy"]
      - name: nccl internode
        type: vetnode.evaluations.nccl_lib_eval.NcclLibEval
        requirements: ["cuda-python", "numpy"]
        payload: 8 GB
        topology: internode
        min_bandwidth: 15 GB/s
        warmup:
          payload: 256 MB
          runs: 3
      - name: env
        type: vetnode.evaluations.env_var_eval.EnvVarEval
        expected:
          NCCL_NET: "AWS Libfabric"
          FI_PROVIDER: null
    """)


def findings(text):
    return [(f.severity, f.line, f.path, f"{f.message} {f.hint}".strip()) for f in validate_protocol(text).findings]


def test_the_alps_example_is_valid_and_the_bandwidth_unit_trap_is_explained():
    report = validate_protocol(ALPS)
    assert report.valid and report.name == "alps-ml-vetting"
    [trap] = report.findings
    assert (trap.severity, trap.line, trap.column, trap.path) == ("warning", 19, 20, "evals[2].min_bandwidth")
    assert "must report more than 16.11 GB/s to pass" in trap.message and "write 13.97 GB/s" in trap.hint
    nccl = report.evals[2]
    assert nccl["min_bandwidth"]["reported_gbs"] == pytest.approx(16.106, abs=1e-3) and nccl["topology"] == "internode"


@pytest.mark.parametrize("change, line, path, text", [
    (("max_used_memory: 0.2", "max_used_memory: 20"), 9, "evals[0].max_used_memory", "a fraction from 0 to 1, not 20"),
    (("    max_temp: 30\n", ""), 6, "evals[0].max_temp", "(GPUEval) needs max_temp"),
    (("max_temp: 30", "max_temp: hot"), 8, "evals[0].max_temp", "must be a whole number"),
    (('["cuda-python==12.*", "numpy"]', '["cuda-python"]'), 13, "evals[1].requirements", "CUDAEval accepts exactly"),
    (("nccl_lib_eval.NcclLibEval", "nccl_eval.NCCLEval"), 15, "evals[2].type", "split in May 2025"),
    (("gpu_eval.GPUEval", "gpu_eval.GpuEval"), 7, "evals[0].type", "did you mean vetnode.evaluations.gpu_eval.GPUEval"),
    (("topology: internode", "topology: inter-node"), 18, "evals[2].topology", "one of intranode, internode, full"),
    (("payload: 8 GB", "payload: eight"), 17, "evals[2].payload", "a size such as 4 GB"),
    (("min_bandwidth: 15 GB/s", "min_bandwidth: fast"), 19, "evals[2].min_bandwidth", "a bandwidth such as 15 GB/s"),
    (("scheduler: slurm", "scheduler: standalone"), 15, "evals[2].type", "NcclLibEval needs a scheduler"),
    (("scheduler: slurm", "scheduler: pbs"), 2, "scheduler", "slurm or standalone"),
    (("index_url: https://", "index_url: jfrog://"), 4, "pip.index_url", "http(s) URL"),
    (("  - name: env\n", "  - name: gpu idle\n"), 23, "evals[3].name", "a second evaluation is named 'gpu idle' (first at line 6)"),
    (("NCCL_NET: \"AWS Libfabric\"", "NCCL_NET: 1"), 26, "evals[3].expected.NCCL_NET", "compared as text: quote it"),
    (("      runs: 3", "      runs: 3\n      rounds: 5"), 23, "evals[2].warmup.rounds", "warmup has no 'rounds'"),
])
def test_each_problem_at_its_line(change, line, path, text):
    result = findings(ALPS.replace(*change))
    matching = [f for f in result if f[2] == path and text in f[3]]
    assert matching, result
    assert matching[0][1] == line


def test_documents_that_are_not_protocols():
    assert findings("")[0][:3] == ("error", 1, "") and findings("")[0][3].startswith("the protocol is empty")
    assert findings("- a\n- b\n")[0][3] == "a protocol is a mapping with name, scheduler and evals"
    [(severity, line, _, message)] = findings("name: x\nevals: [\n")
    assert severity == "error" and line == 3 and message.startswith("not YAML")
    assert [f[3].split(" add ")[0] for f in findings("evals: []\n")] == ["the protocol has no name",
                                                                         "evals must be a non-empty list of evaluations"]
    duplicate = findings("name: a\nname: b\nevals:\n  - name: r\n    type: vetnode.evaluations.random.RandomEval\n")
    assert ("error", 2, "name", "'name' appears twice; YAML keeps only the last first at line 1") in duplicate
    assert any("passes or fails at random" in f[3] for f in duplicate)


def test_every_finding_has_a_line_and_column():
    broken = ALPS.replace("max_temp: 30", "max_temp: [1]").replace("requirements: [\"cuda-python\", \"numpy\"]", "") + "  - 3\n"
    report = validate_protocol(broken)
    assert report.findings and all(f.line >= 1 and f.column >= 1 for f in report.findings)


def test_sizes_and_rates_are_binary_as_vetnode_reads_them():
    assert parse_size("4 GB") == 4 * 2**30 and parse_size("256MB") == 256 * 2**20 and parse_size(1024) == 1024
    assert parse_rate("15 GB/s") == 15 * 2**30 and parse_rate("15 GiB/s") == 15 * 2**30
    assert parse_size("lots") is None and parse_rate("15 GB") is None
