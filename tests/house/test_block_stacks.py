"""The stack folding of benchmarks/block_stacks.py, on `perf script` text of the shape perf 6.x
prints (a pure function; the benchmark itself needs perf and runs by hand)."""

import sys

from helpers import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import block_stacks  # noqa: E402

SCRIPT = """\
triton_python_b   4242 [001]  100.000001: sched:sched_switch: prev_comm=triton_python_b prev_pid=4242
\tffffffff81a0 __schedule+0x2f0 ([kernel.kallsyms])
\tffffffff81a1 schedule+0x5d ([kernel.kallsyms])
\t7f0000000001 futex_wait+0x40 (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t7f0000000002 __pthread_mutex_lock_full+0x1a (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t7f0000000003 triton::backend::python::PbTensor::~PbTensor()+0x33 (/opt/stub)

python   5151 [000]  100.000002: sched:sched_switch: prev_comm=python prev_pid=5151
\tffffffff81a0 __schedule+0x2f0 ([kernel.kallsyms])
\t7f0000000004 __new_sem_wait_slow64+0x10 (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t7f0000000005 triton::backend::python::StubLauncher::ReceiveMessageFromStub()+0x9 (/opt/libtriton_python.so)

triton_python_b   4242 [001]  100.000003: sched:sched_switch: prev_comm=triton_python_b prev_pid=4242
\tffffffff81a0 __schedule+0x2f0 ([kernel.kallsyms])
\t7f0000000001 futex_wait+0x40 (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t7f0000000002 __pthread_mutex_lock_full+0x99 (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t7f0000000006 triton::backend::python::InferRequest::~InferRequest()+0x1 (/opt/stub)
"""


def test_fold_groups_user_space_stacks_per_thread():
    stacks = block_stacks.fold(SCRIPT.splitlines(), depth=2)
    assert set(stacks) == {"triton_python_b:4242", "python:5151"}
    stub = stacks["triton_python_b:4242"]
    # kernel frames dropped, offsets stripped, cut at depth: the two mutex waits fold together
    assert stub == {"futex_wait <- __pthread_mutex_lock_full": 2}
    assert stacks["python:5151"] == {
        "__new_sem_wait_slow64 <- triton::backend::python::StubLauncher::ReceiveMessageFromStub()": 1}


def test_fold_keeps_stacks_apart_below_the_cut():
    stacks = block_stacks.fold(SCRIPT.splitlines(), depth=3)["triton_python_b:4242"]
    assert sorted(stacks.values()) == [1, 1]
    assert all(s.startswith(f"futex_wait <- {block_stacks.MUTEX_FRAME}") for s in stacks)
