"""rig.repro.evidence, a part of the script: finalize before, after or never, the verdicts, the log
lines that matter, a stub that dies at exit and requests lost."""

from __future__ import annotations

from rig.repro import evidence as repro_evidence


def test_finalize_before_after_never_and_the_verdicts():
    marks = [
        {"phase": "init", "pid": 1, "instance": "a", "t_mono": 0.0},
        {"phase": "init", "pid": 2, "instance": "b", "t_mono": 0.0},
        {"phase": "init", "pid": 3, "instance": "c", "t_mono": 0.0},
        {"phase": "finalize_start", "pid": 1, "instance": "a", "t_mono": 9.0},
        {"phase": "finalize_end", "pid": 1, "instance": "a", "t_mono": 9.5},
        {"phase": "finalize_start", "pid": 2, "instance": "b", "t_mono": 11.0},
        {"phase": "finalize_end", "pid": 2, "instance": "b", "t_mono": 11.5},
        {"phase": "finalize_end", "pid": 9, "instance": "x", "t_mono": 1.0},  # no init: not this run's
    ]
    s = repro_evidence.finalize_summary(marks, 10.0)
    assert (s["expected"], s["before"], s["after"], s["never"]) == (3, 1, 1, 1)
    assert [i["when"] for i in s["instances"]] == ["before", "after", "never"]
    assert not s["instances"][2]["called"]
    assert repro_evidence.lifecycle_verdict(False, "Exit timeout expired. Exiting immediately.", s) == "exit_timeout"
    assert repro_evidence.lifecycle_verdict(False, "something else", s) == "stop_error"
    assert repro_evidence.lifecycle_verdict(False, None, s) == "finalize_missing"
    assert repro_evidence.lifecycle_verdict(True, None, s) == "load_failed"
    clean = repro_evidence.finalize_summary(marks[:1] + marks[3:5], 10.0)
    assert repro_evidence.lifecycle_verdict(False, None, clean) == "clean"
    assert repro_evidence.admits("exit_timeout|clean", "clean") and not repro_evidence.admits("clean", "exit_timeout")


def test_the_log_lines_that_matter():
    log = "\n".join([
        'E1206 12:57:22.611844 32438 server.cc:241] "CudaDriverHelper has not been initialized."',
        'I1206 12:57:22.612668 32438 model_lifecycle.cc:472] "loading: numpy:1"',
        "| Model | Version | Status |",
        'I1206 12:57:22.735766 32438 tritonserver.cc:2598] ',
        ('I1206 12:57:22.832209 32438 server.cc:345] "Timeout 5: Found 1 live models and 0 in-flight non-inference '
         'requests"'),
        'W1206 12:57:22.9 32438 other.cc:1] "nothing to see"',
        ('I1206 12:57:23.832393 32438 server.cc:345] "Timeout 4: Found 1 live models and 0 in-flight non-inference '
         'requests"'),
        *[f'E1206 12:57:24.{k} 32438 pb_stub.cc:714] "Failed to process the request(s) for model \'numpy_0_0\', '
          f'message: ValueError: fault injection: execute raises (call {3 * k})\\n\\nAt:\\n  model.py(77)"'
          for k in (1, 2, 3)],
    ])
    lines = repro_evidence.log_lines(log)
    assert lines == ['I 12:57:22.612668 model_lifecycle.cc:472] "loading: numpy:1"',
                     ('I 12:57:22.832209 server.cc:345] "Timeout 5: Found 1 live models and 0 in-flight '
                      'non-inference requests"'),
                     ('I 12:57:23.832393 server.cc:345] "Timeout 4: Found 1 live models and 0 in-flight '
                      'non-inference requests"'),
                     ("E 12:57:24.1 pb_stub.cc:714] \"Failed to process the request(s) for model 'numpy_0_0', "
                      "message: ValueError: fault injection: execute raises (call 3) (and 2 more like it)")]


def test_a_stub_that_dies_at_exit_and_requests_lost():
    marks = [{"phase": "init", "pid": 7, "instance": "r_0", "t_mono": 0.0},
             {"phase": "finalize_start", "pid": 7, "instance": "r_0", "t_mono": 1.0},
             {"phase": "finalize_end", "pid": 7, "instance": "r_0", "t_mono": 1.5}]
    s = repro_evidence.finalize_summary(marks, 2.0)
    at_exit = [{"pid": 7, "phase": "crash", "signal": 11, "t_mono": 2.5}]
    under_load = [{"pid": 7, "phase": "crash", "signal": 11, "t_mono": 0.5}]
    assert repro_evidence.exit_aborts(at_exit, marks) == 1 and repro_evidence.exit_aborts(under_load, marks) == 0
    assert repro_evidence.lifecycle_verdict(False, None, s, crashes=1, aborts_at_exit=1) == "aborted_at_exit"
    assert repro_evidence.lifecycle_verdict(False, None, s, crashes=1, aborts_at_exit=0) == "stub_crashed"
    assert repro_evidence.lifecycle_verdict(False, None, s, lost=2) == "requests_lost"
