"""What every side of the rig shares and that knows nothing of Triton or of a run: errors and exit
statuses, numbers for people, process groups, process probes, HDR histograms, robust trends, JUnit XML."""
