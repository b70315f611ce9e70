"""What the commands that run Triton do, beneath the commands that parse and print for them: a soak's
run and its tally (``soak``, ``tally``, ``soak_junit``, ``summary``), a bench's sweep (``bench``,
``bench_pa``, ``bench_time``, ``bench_point``), a matrix's plan, jobs and run (``matrix_plan``,
``matrix_jobs``, ``matrix_run``), a bisection (``bisect``, ``bisect_span``, ``step_bar``) and a gate's
two sides (``gate_sides``). They drive the orchestrator and write the store; the commands
(``rig.commands``) call them, and they never import a command."""
