#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A small PyTorch DistributedDataParallel trainer that runs under axctl as it is.

It learns a fixed random function of 16 inputs with a two-layer MLP and Adam, on data
generated from --seed, and needs nothing but what axctl puts in every rank's environment
(README.md lists them; the job spec must say "framework": "torch"):

- MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE: torch's env:// rendezvous;
- AXCTL_CHECKPOINT_DIR: rank 0 commits the model and optimizer every --checkpoint-every
  steps as <dir>/step_%08d/ (AXLearn's layout), the `index` file written last, so a
  step directory without its index is never resumed from;
- AXCTL_RESUME_CHECKPOINT / AXCTL_RESUME_STEP: after a failure, the committed
  checkpoint the new attempt starts from (empty on a fresh start);
- AXCTL_PROGRESS_FILE: the step just finished, which is how axctl tells progress from a
  hang.

A run resumed from a checkpoint ends with the same parameters, bit for bit, as a run that
was never interrupted: the model, the optimizer state and the data position (a function
of the step) are all restored, and every rank sees the same data in the same order. The
last line of every rank is `final params sha256 <hex> step <n>`.

On GPUs: --backend nccl. Each rank then trains on cuda:0, which is the first of the
devices axctl gave it in CUDA_VISIBLE_DEVICES (not LOCAL_RANK: a rank sees only its own
GPUs). See README.md.
"""

import argparse
import hashlib
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

FEATURES = 16
HIDDEN = 32
STATE_FILES = ("model.pt", "optimizer.pt")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200, help="optimizer steps in all (default 200)")
    p.add_argument("--checkpoint-every", type=int, default=20, metavar="N",
                   help="rank 0 commits a checkpoint every N steps and at the end "
                        "(0: only at the end)")
    p.add_argument("--batch-size", type=int, default=16, help="samples per rank and step")
    p.add_argument("--samples", type=int, default=2048, help="size of the generated data set")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=0, help="seeds the data, the model and the shuffling")
    p.add_argument("--backend", default="gloo", choices=("gloo", "nccl"),
                   help="gloo on CPUs, nccl on NVIDIA GPUs")
    p.add_argument("--threads", type=int, default=1, help="torch's intra-op threads per rank")
    p.add_argument("--step-sleep-ms", type=int, default=0,
                   help="pause after each step, so that a run this small lasts long enough to "
                        "be interrupted in a demo or a test")
    args = p.parse_args(argv)
    if args.steps < 1 or args.checkpoint_every < 0 or args.batch_size < 1 or args.threads < 1:
        p.error("--steps, --batch-size and --threads must be positive, "
                "--checkpoint-every not negative")
    return args


def log(rank, msg):
    print("rank %d: %s" % (rank, msg), flush=True)


def make_data(seed, samples):
    """Inputs and targets of a fixed random teacher network: the same on every rank."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, FEATURES, generator=g)
    teacher = torch.randn(FEATURES, 1, generator=g)
    y = torch.tanh(x @ teacher) + 0.05 * torch.randn(samples, 1, generator=g)
    return TensorDataset(x, y)


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(),
                               torch.nn.Linear(HIDDEN, 1))


def write_atomic(path, write):
    """Writes path through a temporary file renamed over it once flushed to disk, so a
    crash leaves either the old file or the new one, never a torn one."""
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def checkpoint_save(ckpt_dir, step, model, optimizer, world_size):
    """Commits step: the state files first, then `index`. Returns the step directory."""
    step_dir = os.path.join(ckpt_dir, "step_%08d" % step)
    index_path = os.path.join(step_dir, "index")
    if os.path.exists(index_path):
        # Committed by an earlier attempt, which axctl may already resume from: a
        # committed checkpoint is never rewritten.
        return step_dir
    # A directory left without its index by an attempt that died is overwritten.
    os.makedirs(step_dir, exist_ok=True)
    write_atomic(os.path.join(step_dir, "model.pt"), lambda f: torch.save(model.state_dict(), f))
    write_atomic(os.path.join(step_dir, "optimizer.pt"),
                 lambda f: torch.save(optimizer.state_dict(), f))
    fsync_dir(step_dir)
    index = {"step": step, "world_size": world_size, "files": list(STATE_FILES)}
    write_atomic(index_path, lambda f: f.write(json.dumps(index).encode() + b"\n"))
    fsync_dir(step_dir)
    fsync_dir(ckpt_dir)
    return step_dir


def checkpoint_load(step_dir, expected_step, world_size, model, optimizer, device):
    """Restores model and optimizer from a committed step directory; returns its step."""
    with open(os.path.join(step_dir, "index")) as f:
        index = json.load(f)
    step = int(index["step"])
    if expected_step is not None and step != expected_step:
        raise RuntimeError("%s holds step %d, axctl asked to resume at %d"
                           % (step_dir, step, expected_step))
    # Each rank's share of the data depends on the number of ranks.
    if index["world_size"] != world_size:
        raise RuntimeError("%s was written by %d ranks, this gang has %d"
                           % (step_dir, index["world_size"], world_size))
    model.load_state_dict(torch.load(os.path.join(step_dir, "model.pt"), map_location=device))
    optimizer.load_state_dict(torch.load(os.path.join(step_dir, "optimizer.pt"), map_location=device))
    return step


def allreduce_each_gradient(process_group, bucket):
    """A DDP communication hook that averages every gradient on its own. DDP puts all
    gradients in one bucket for its first iteration and regroups them afterwards, and a
    ring all-reduce sums an element in an order that depends on where it lies in the
    bucket: with DDP's own hook, the first step after a resume would round differently
    from the same step of an uninterrupted run. Reducing each parameter's gradient alone
    gives every step the same order, at the cost of one all-reduce per tensor."""
    world = dist.get_world_size(process_group)
    buffer = bucket.buffer()
    # gradients() are views into buffer: reducing them in place reduces the bucket.
    futures = [dist.all_reduce(g, group=process_group, async_op=True).get_future()
               for g in bucket.gradients()]

    def average(done):
        # value() raises the error of a failed all-reduce (a peer died): without this
        # the rank would go on training on its own gradients and commit checkpoints
        # of a run that no longer exists.
        for f in done.value():
            f.value()
        return buffer.div_(world)

    return torch.futures.collect_all(futures).then(average)


def progress_write(path, step):
    if path:
        write_atomic(path, lambda f: f.write(b"%d\n" % step))


def params_digest(model):
    """SHA-256 over every parameter's name and raw bytes: equal only if bit-identical."""
    h = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def main(argv):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    # Bit-identical resumes need deterministic kernels (on GPUs too: cuBLAS, cuDNN).
    torch.use_deterministic_algorithms(True)
    if args.backend == "nccl":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

    # env:// reads MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE, which axctl sets.
    dist.init_process_group(backend=args.backend, init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda:0" if args.backend == "nccl" else "cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)

    dataset = make_data(args.seed, args.samples)
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True,
                                 seed=args.seed, drop_last=True)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    steps_per_epoch = len(loader)
    if steps_per_epoch == 0:
        raise SystemExit("train.py: --samples %d is too few for %d ranks of --batch-size %d"
                         % (args.samples, world, args.batch_size))

    model = make_model(args.seed).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    ckpt_dir = os.environ.get("AXCTL_CHECKPOINT_DIR", "")
    progress_file = os.environ.get("AXCTL_PROGRESS_FILE", "")
    resume_dir = os.environ.get("AXCTL_RESUME_CHECKPOINT", "")
    resume_step = os.environ.get("AXCTL_RESUME_STEP", "")

    step = 0
    if resume_dir:
        step = checkpoint_load(resume_dir, int(resume_step) if resume_step else None, world,
                               model, optimizer, device)
        log(rank, "resumed at step %d from %s" % (step, resume_dir))
    else:
        log(rank, "fresh start, world size %d, %d steps per epoch" % (world, steps_per_epoch))
    # Construct DDP after loading: it broadcasts rank 0's parameters to the others.
    ddp = DistributedDataParallel(model, device_ids=[0] if device.type == "cuda" else None)
    ddp.register_comm_hook(None, allreduce_each_gradient)
    progress_write(progress_file, step)

    loss_fn = torch.nn.MSELoss()
    while step < args.steps:
        # The data position is a function of the step: the epoch seeds the shuffle and
        # the batches of that epoch already trained on are skipped.
        epoch, done_in_epoch = divmod(step, steps_per_epoch)
        sampler.set_epoch(epoch)
        for batch, (x, y) in enumerate(loader):
            if batch < done_in_epoch:
                continue
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(ddp(x.to(device)), y.to(device))
            loss.backward()  # DDP all-reduces the gradients here
            optimizer.step()
            step += 1
            progress_write(progress_file, step)
            if step % 20 == 0 or step == args.steps:
                log(rank, "step %d loss %.6f" % (step, loss.item()))
            due = step == args.steps or (args.checkpoint_every and step % args.checkpoint_every == 0)
            if rank == 0 and ckpt_dir and due:
                log(rank, "checkpoint %s" % checkpoint_save(ckpt_dir, step, model, optimizer, world))
            if args.step_sleep_ms:
                time.sleep(args.step_sleep_ms / 1000.0)
            if step == args.steps:
                break

    print("final params sha256 %s step %d" % (params_digest(model), step), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
