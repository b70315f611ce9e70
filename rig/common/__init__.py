"""What every side of the rig shares and that knows nothing of Triton or of a run: errors and exit
statuses, numbers for people, child processes and the C compiler, process probes, HDR histograms,
robust trends, perf_analyzer's stability rule, CPU idle states and shares, GPUs, wheels, a file
written whole, the rig's version."""
