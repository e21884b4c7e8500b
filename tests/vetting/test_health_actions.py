"""Node health states, and the scontrol backend's reading of nodes and its refusals (Slurm itself:
tests/vetting/test_slurm_drain.py)."""
import pytest

from apps.vetting.scontrol import ActionRefused, SlurmNodeActions, parse_node_line
from apps.vetting.node_states import TransitionError, allowed_actions, rule_target, staff_target

LINE = ("NodeName=node2 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUTot=2 CPULoad=0.10 AvailableFeatures=(null) "
        "ActiveFeatures=(null) Gres=(null) NodeAddr=localhost NodeHostName=localhost Version=22.05.8 OS=Linux 6.1.0 "
        "RealMemory=1000 AllocMem=0 FreeMem=1200 Sockets=2 Boards=1 State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 "
        "Owner=N/A MCS_label=N/A Partitions=debug BootTime=2026-11-23T08:00:00 SlurmdStartTime=2026-11-23T08:01:00 "
        "LastBusyTime=2026-11-23T09:00:00 CfgTRES=cpu=2,mem=1000M,billing=2 AllocTRES= CapWatts=n/a CurrentWatts=0 "
        "AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s "
        "Reason=Belvedere: 3 failed GPU evaluations in 7 days [root@2026-11-23T10:15:02]")


def test_rules_only_raise_states_staff_move_them_all_ways():
    assert rule_target("healthy", "suspect") == "suspect" and rule_target("suspect", "exclude_now") == "drain_recommended"
    assert rule_target("drain_recommended", "suspect") is None and rule_target("drained", "exclude_now") is None
    assert rule_target("returned", "suspect") == "suspect"
    assert staff_target("drain_recommended", "drain") == "drained" and staff_target("drained", "repair") == "in_repair"
    assert staff_target("in_repair", "return") == "returned" and staff_target("suspect", "acknowledge") == "suspect"
    with pytest.raises(TransitionError, match="a node that is healthy cannot be returned to service; possible: drain"):
        staff_target("healthy", "return")
    assert allowed_actions("drained") == ["acknowledge", "repair", "return"]


def test_scontrol_lines_are_read_with_reason_user_and_time():
    info = parse_node_line(LINE)
    assert (info.name, info.state, info.drained, info.drained_by_belvedere) == ("node2", "IDLE+DRAIN", True, True)
    assert info.reason == "Belvedere: 3 failed GPU evaluations in 7 days"
    assert (info.reason_user, info.reason_time) == ("root", "2026-11-23T10:15:02")
    other = parse_node_line(LINE.replace("Reason=Belvedere: 3 failed GPU evaluations in 7 days", "Reason=bad DIMM slot 3"))
    assert other.drained and not other.drained_by_belvedere and other.reason == "bad DIMM slot 3"
    idle = parse_node_line("NodeName=node1 State=IDLE ThreadsPerCore=1")
    assert not idle.drained and idle.reason == ""
    with pytest.raises(ValueError, match="not a line of scontrol show node"):
        parse_node_line("slurm_load_node error: Invalid node name specified")


class Recorder:
    def __init__(self, line):
        self.line, self.calls = line, []

    def __call__(self, args, timeout):
        self.calls.append(args)
        return self.line if args[1] == "show" else ""


def test_dry_runs_say_what_they_would_run_and_other_peoples_drains_are_refused():
    run = Recorder(LINE.replace("Reason=Belvedere: 3 failed GPU evaluations in 7 days", "Reason=maintenance"))
    backend = SlurmNodeActions(run, dry_run=True)
    result = backend.drain("node2", "gpu idle failed 3 times")
    assert not result.executed and result.dry_run
    assert result.command_line == "scontrol update NodeName=node2 State=DRAIN 'Reason=Belvedere: gpu idle failed 3 times'"
    assert run.calls == []
    with pytest.raises(ActionRefused, match="drained by root with reason 'maintenance', not by Belvedere"):
        SlurmNodeActions(run, dry_run=False).resume("node2")
    assert all(call[1] == "show" for call in run.calls)  # never an update


@pytest.mark.parametrize("reason", ["$(touch {canary})", "`touch {canary}`", "it's; touch {canary}", '"; touch {canary}; echo "',
                                    "a\\b $HOME ${{PATH}} | touch {canary} & echo"])
def test_the_displayed_command_is_shell_quoted(reason, tmp_path):
    """Issue 16 item 11: the command was shown with naive quoting; pasted into a shell, a reason with $(...) or
    backticks would run. The displayed line, given to a real shell, must give back exactly the argument list."""
    import shlex
    import subprocess

    canary = tmp_path / "ran"
    result = SlurmNodeActions(Recorder(LINE), dry_run=True).drain("node2", reason.format(canary=canary))
    line = result.command_line
    assert shlex.split(line) == result.command
    echoed = subprocess.run(["sh", "-c", "printf '%s\\n' " + line.removeprefix("scontrol ")], capture_output=True, text=True,
                            check=True).stdout
    assert echoed.splitlines() == result.command[1:]
    assert not canary.exists()
