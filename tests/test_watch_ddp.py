"""watch() under torch.distributed: two CPU processes on gloo (loopback only), statistics
reduced over the ranks or kept per rank, one file written by rank 0; and FSDP2's sharded
parameters.

Its own file, so that pytest-xdist runs it beside the other tests: it waits on two
child processes most of its time.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 120


def run_rank(rank: int, world: int, port: int, out: str) -> None:
    """One rank: train a small model under DDP for three steps, watched twice (reduced and per rank)."""
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    from graphviz_autograd import watch

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    try:
        torch.manual_seed(0)  # the same model on every rank
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        ddp = DistributedDataParallel(model)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
        torch.manual_seed(1 + rank)  # different data on each rank
        with watch(ddp, optimizer=opt, every=1, histogram_every=1) as reduced, \
                watch(ddp, optimizer=opt, every=1, histogram_every=1, ranks="each", graph=False) as each:
            for _ in range(3):
                ddp(torch.randn(8, 4) * (1 + rank)).pow(2).mean().backward()
                opt.step()
                opt.zero_grad()
        written = reduced.save_json(Path(out) / "reduced.json")
        each.save_json(Path(out) / "each.json")
        # The page's choice of rank: every rank's series, gathered as each step was logged.
        (Path(out) / f"timeline{rank}.json").write_text(json.dumps(each.timeline().get("ranks")), encoding="utf-8")
        (Path(out) / f"rank{rank}.txt").write_text(str(written), encoding="utf-8")
        fully_sharded(Path(out))
        dist.barrier()
    except BaseException:
        dist.destroy_process_group()
        raise
    # Leave without running the interpreter's teardown: with FSDP2 on gloo, torch's
    # threads sometimes abort the process at exit ("terminate called without an active
    # exception") after every file was written. The barrier above is the last collective.
    sys.stdout.flush()
    os._exit(0)


def fully_sharded(out: Path) -> None:
    """FSDP2: a model whose parameters are sharded over the ranks (DTensors), watched; rank 0
    also writes the gradient norms of an unsharded copy given the same batch."""
    import torch
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from graphviz_autograd import watch

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    plain = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    plain.load_state_dict(model.state_dict())
    mesh = init_device_mesh("cpu", (2,))
    fully_shard(model[0], mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(2)  # the same batch on every rank
    x = torch.randn(8, 4)
    with watch(model, optimizer=opt, every=1) as w:
        model(x).pow(2).mean().backward()
        opt.step()
    w.save_json(out / "fsdp.json")
    plain(x).pow(2).mean().backward()
    if torch.distributed.get_rank() == 0:
        norms = {name: p.grad.norm().item() for name, p in plain.named_parameters()}
        (out / "plain_norms.json").write_text(json.dumps(norms), encoding="utf-8")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_statistics_are_reduced_over_ranks_and_rank_0_writes_one_file(tmp_path):
    pytest.importorskip("torch.distributed")
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT), GLOO_SOCKET_IFNAME="lo")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", f"from tests.test_watch_ddp import run_rank; run_rank({rank}, 2, {port}, {str(tmp_path)!r})"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for rank in range(2)
    ]
    outputs = []
    try:
        for proc in procs:
            outputs.append(proc.communicate(timeout=TIMEOUT)[0])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [proc.returncode for proc in procs] == [0, 0], "\n".join(outputs)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "each.json", "fsdp.json", "plain_norms.json", "rank0.txt", "rank1.txt", "reduced.json", "timeline0.json", "timeline1.json"
    ]
    assert (tmp_path / "rank1.txt").read_text() == "None"  # only rank 0 wrote
    reduced = json.loads((tmp_path / "reduced.json").read_text())
    each = json.loads((tmp_path / "each.json").read_text())
    assert reduced["world_size"] == 2 and reduced["steps"] == [0, 1, 2]
    ranks = each["ranks"]
    assert len(ranks) == 2
    # Means over ranks, largest values' largest, histograms' sums; the data differ per rank.
    for step in range(3):
        means = [r["statistics"]["activation_mean"]["0"][step] for r in ranks]
        assert means[0] != pytest.approx(means[1])
        assert reduced["statistics"]["activation_mean"]["0"][step] == pytest.approx(sum(means) / 2, rel=1e-5)
        largest = [r["statistics"]["activation_abs_max"]["2"][step] for r in ranks]
        assert reduced["statistics"]["activation_abs_max"]["2"][step] == pytest.approx(max(largest), rel=1e-5)
        counts = [r["histograms"]["activation"]["0"][step] for r in ranks]
        assert reduced["histograms"]["activation"]["0"][step] == [a + b for a, b in zip(*counts)]
    # DDP averages gradients before the optimizer's step: every rank saw the same gradient norms.
    norms = [r["statistics"]["grad_norm"]["0.weight"] for r in ranks]
    assert norms[0] == pytest.approx(norms[1], rel=1e-5)
    assert reduced["statistics"]["grad_norm"]["0.weight"] == pytest.approx(norms[0], rel=1e-5)
    # and the same parameters: their histograms are one rank's counts, not twice them.
    assert reduced["histograms"]["param"]["0.weight"] == ranks[0]["histograms"]["param"]["0.weight"]
    # FSDP2: each parameter is gathered whole on logged steps; its gradient norm is the unsharded model's.
    sharded = json.loads((tmp_path / "fsdp.json").read_text())
    plain = json.loads((tmp_path / "plain_norms.json").read_text())
    assert {name: values[0] for name, values in sharded["statistics"]["grad_norm"].items()} == pytest.approx(plain, rel=1e-5)
    # The page's choice of rank: every rank holds every rank's series, as save_json writes them.
    for rank in range(2):
        timeline = json.loads((tmp_path / f"timeline{rank}.json").read_text())
        assert len(timeline) == 2
        for r in range(2):
            assert timeline[r]["statistics"]["activation_mean"] == each["ranks"][r]["statistics"]["activation_mean"]
            assert timeline[r]["histograms"]["activation"]["0"] == each["ranks"][r]["histograms"]["activation"]["0"]
