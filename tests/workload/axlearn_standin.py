# SPDX-License-Identifier: MIT
"""Stands in for `python -m axlearn.common.launch_trainer_main` in the tests of
examples/axlearn's job specs (tests/integration/test_examples.py), where neither JAX nor
an accelerator is at hand. It takes the flags the specs pass and behaves as AXLearn does
at the points axctl depends on:

- the distributed flags must name the gang axctl set up (axlearn/common/launch.py gives
  them to jax.distributed.initialize through axlearn/common/utils_spmd.py);
- checkpoints live in <trainer_dir>/checkpoints/step_%08d/ and one is committed once its
  `index` exists, written by process 0 after the others saved (axlearn/common/
  checkpointer.py, Checkpointer); the trainer restores the latest committed one on
  start (SpmdTrainer.restore_checkpoint in axlearn/common/trainer.py), whatever axctl's
  AXCTL_RESUME_STEP says.

It prints `flags ok`, the environment a trainer reads for its devices and tuning, a
`restored step N` line, and `done step N` at the end. Standard library only."""

import os
import sys
import time

DEVICE_VARS = ("CUDA_VISIBLE_DEVICES", "TPU_VISIBLE_CHIPS", "TPU_WORKER_ID",
               "NEURON_RT_VISIBLE_CORES", "NEURON_PJRT_PROCESS_INDEX", "XLA_FLAGS",
               "LIBTPU_INIT_ARGS", "NEURON_CC_FLAGS", "NEURON_LOGICAL_NC_CONFIG", "DATA_DIR")
STEPS = 12
SAVE_EVERY = 3
STEP_SECONDS = 0.1


def parse_flags(argv):
    """absl's --name=value flags; `-m MODULE` as python would take it."""
    flags = {}
    args = list(argv)
    if args[:2] == ["-m", "axlearn.common.launch_trainer_main"]:
        args = args[2:]
    for a in args:
        if not a.startswith("--") or "=" not in a:
            sys.exit("axlearn stand-in: unexpected argument %r" % a)
        name, value = a[2:].split("=", 1)
        flags[name] = value
    return flags


def check_flags(flags):
    """The flags launch.py and launch_trainer.py require, and the gang's identity."""
    for name in ("module", "config", "trainer_dir", "jax_backend"):
        if not flags.get(name):
            sys.exit("axlearn stand-in: --%s is required" % name)
    want = {"distributed_coordinator": os.environ.get("JAX_COORDINATOR_ADDRESS"),
            "num_processes": os.environ.get("AXCTL_WORLD_SIZE"),
            "process_id": os.environ.get("AXCTL_RANK")}
    for name, value in want.items():
        if not value or flags.get(name) != value:
            sys.exit("axlearn stand-in: --%s=%r, the gang's is %r" % (name, flags.get(name), value))


def committed_steps(ckpt_dir):
    try:
        names = os.listdir(ckpt_dir)
    except FileNotFoundError:
        return []
    return sorted(int(n[5:]) for n in names
                  if n.startswith("step_") and os.path.exists(os.path.join(ckpt_dir, n, "index")))


def save(ckpt_dir, step):
    """Process 0's part of a save: the state, then the index that commits it."""
    step_dir = os.path.join(ckpt_dir, "step_%08d" % step)
    os.makedirs(step_dir, exist_ok=True)
    with open(os.path.join(step_dir, "gda_state"), "w") as f:
        f.write("step %d\n" % step)
    tmp = os.path.join(step_dir, "index.tmp")
    with open(tmp, "w") as f:
        f.write('[["step", %d]]\n' % step)
    os.replace(tmp, os.path.join(step_dir, "index"))


def main(argv):
    flags = parse_flags(argv)
    check_flags(flags)
    print("flags ok", flush=True)
    for name in DEVICE_VARS:
        if name in os.environ:
            print("env %s=%s" % (name, os.environ[name]), flush=True)

    ckpt_dir = os.path.join(flags["trainer_dir"], "checkpoints")
    steps = committed_steps(ckpt_dir)
    step = steps[-1] if steps else 0
    print("restored step %d" % step, flush=True)
    # Like AXLearn, no AXCTL_PROGRESS_FILE: axctl sees progress in checkpoints only.
    while step < STEPS:
        time.sleep(STEP_SECONDS)
        step += 1
        if os.environ.get("AXCTL_RANK") == "0" and step % SAVE_EVERY == 0:
            save(ckpt_dir, step)
    print("done step %d" % step, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
