"""What the commands that run Triton, or that probe this machine, do, beneath the commands that parse
and print for them: a soak's run and its tally (``soak``, ``tally``, ``soak_junit``, ``summary``), a
bench's sweep (``bench``, ``bench_pa``, ``bench_time``, ``bench_point``), a matrix's setup, plan, jobs,
run, races and table (``matrix_setup``, ``matrix_plan``, ``matrix_jobs``, ``matrix_run``,
``matrix_races``, ``matrix_table``), a bisection (``bisect``, ``bisect_plan``, ``bisect_judge``,
``bisect_span``, ``step_bar``), a gate (``gate``, its two sides ``gate_sides`` and its lines
``gate_lines``), a fleet's rounds (``fleet``) and what is usable here (``doctor``). They drive the
orchestrator and write the store; the commands (``rig.commands``) call them, and they never import a
command."""
