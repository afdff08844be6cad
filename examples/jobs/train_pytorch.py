"""A PyTorch job for tessel's real nodes.

Submit it with, for example:

    tessel submit --gpus 4 --iterations 5000 -- python3 train_pytorch.py --iterations 5000

tessel starts one process per GPU with the usual torch.distributed variables
(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and
CUDA_VISIBLE_DEVICES, so `init_process_group` needs no arguments. With CUDA it
trains on the rank's GPU over NCCL; without (no CUDA, or CUDA_VISIBLE_DEVICES
empty: agents with --fake-gpus on a machine without GPUs), on the CPU over
gloo, so the same job runs on a laptop or in CI.
On preemption the whole process group gets SIGTERM, then SIGKILL after the
grace period: save a checkpoint and exit. When TESSEL_RESUME=1, load it.
Progress lines appended to $TESSEL_PROGRESS let LAS/SRTF-like policies see
how far the job is.
"""
import argparse
import os
import signal
import time

import torch
import torch.distributed as dist
import torch.nn as nn

stop = False


def on_sigterm(signum, frame):
    global stop
    stop = True


def report_progress(iteration, total):
    path = os.environ.get("TESSEL_PROGRESS")
    if path and int(os.environ.get("RANK", "0")) == 0:
        with open(path, "a") as progress:
            progress.write(f"iteration {iteration} of {total}\n")


def cuda_usable():
    # tessel names the rank's GPUs in CUDA_VISIBLE_DEVICES; empty, there are
    # none to use even where CUDA is installed.
    return torch.cuda.is_available() and os.environ.get("CUDA_VISIBLE_DEVICES", "unset").strip() != ""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, required=True)
    parser.add_argument("--checkpoint", default="checkpoint.pt")
    parser.add_argument("--checkpoint-every", type=int, default=100)
    parser.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                        help="auto: CUDA when this rank can see a GPU, else the CPU")
    parser.add_argument("--hidden", type=int, default=1024, help="the model's width")
    parser.add_argument("--step-seconds", type=float, default=0,
                        help="sleep this long each step: a slower model, for tests and demos")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, on_sigterm)

    local_rank = int(os.environ["LOCAL_RANK"])
    use_cuda = args.device == "cuda" or (args.device == "auto" and cuda_usable())
    if use_cuda:
        # CUDA_VISIBLE_DEVICES holds this node's GPUs of the job, one per local rank.
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank = dist.get_rank()
    layer = nn.Linear(args.hidden, args.hidden).to(device)
    model = nn.parallel.DistributedDataParallel(layer, device_ids=[local_rank] if use_cuda else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    start = 0
    if os.environ.get("TESSEL_RESUME") == "1" and os.path.exists(args.checkpoint):
        state = torch.load(args.checkpoint, map_location=device)
        model.module.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["iteration"]
        print(f"rank {rank}: resumed from iteration {start}", flush=True)

    def save(iteration):
        if rank == 0:
            torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                        "iteration": iteration}, args.checkpoint + ".tmp")
            os.replace(args.checkpoint + ".tmp", args.checkpoint)

    for iteration in range(start, args.iterations):
        # Every rank must agree to stop, or the others hang in all-reduce.
        flag = torch.tensor([1.0 if stop else 0.0], device=device)
        dist.all_reduce(flag)
        if flag.item() > 0:
            save(iteration)
            dist.destroy_process_group()
            return 143
        loss = model(torch.randn(64, args.hidden, device=device)).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if args.step_seconds > 0:
            time.sleep(args.step_seconds)
        if (iteration + 1) % args.checkpoint_every == 0:
            save(iteration + 1)
        report_progress(iteration + 1, args.iterations)
    save(args.iterations)
    dist.destroy_process_group()
    print(f"rank {rank}: done at iteration {args.iterations} on {device} over {'nccl' if use_cuda else 'gloo'}",
          flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
