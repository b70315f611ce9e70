"""The version of the results' schema, the ``schema_version`` column of every row
(``rig.contract.rows``); a store holding older versions is still read.

Schema history (``schema_version`` column):
  1: first version (runs, cycles, windows).
  2: scheduled, dropped, bad_outputs, lane (cycles, windows); lost_samples, clipped (windows).
  3: instances (windows): the model instances of a bench point; error_histogram, error_max_us
     (windows) and error_messages (cycles): failed requests' latencies and messages.
  4: host (cycles, windows): the node that measured the row (``--node``, default the hostname);
     the table ``fleet``: a distributed run's rounds, one row per node and round (``rig fleet``).
  5: cpu_idle (runs): how a bench held the CPUs out of idle while it measured (``rig.common.cpuidle``).
  6: two verdicts per cycle: ``outcome`` is the lifecycle's alone (``infer_error`` and
     ``wrong_output`` are gone from it) and ``load_outcome`` the load's (cycles; see
     ``verdicts.LOAD_OUTCOMES``); ``timeouts`` (cycles, windows): requests unanswered within the
     request timeout, counted in ``errors`` too. Older cycles read as two verdicts
     (``verdicts.upgrade_legacy``).
  7: streaming (decoupled) models (windows): ``first_response_histogram`` (submission to each
     answered request's first response with data, or to its final flag where none had data),
     ``gap_histogram`` (between consecutive data responses of a request), both HDR like
     ``histogram``, with ``first_p50_us``, ``first_p99_us``, ``gap_p50_us``, ``gap_p99_us``,
     ``responses`` and ``responses_per_request``; null in windows of models that do not stream
     (and in older files).
  8: HDR columns (windows' ``histogram``, ``error_histogram``, ``first_response_histogram``,
     ``gap_histogram``; fleet's ``histogram``) hold HdrHistogram's standard encoding, decodable as
     stored by any HdrHistogram library (older files, base64 of it, still read: ``rig.common.hdr``);
     runs: the versions of the packages that shape a figure: ``locust_version`` (null where the
     run sends no Locust load), ``numpy_version`` (the worker's), ``stub_numpy_version`` (the
     numpy the backend stubs import: the rig's numpy-1 folder for an embedded core, else the
     worker's), ``pyarrow_version`` (that wrote the files), ``tritonserver_version`` (the
     bindings; null unless the engine is ``tritonserver``); null in older files.
  9: cycles: ``scenario``, the lifecycle scenario a cycle ran under (``rig.scenarios.catalog``; a run
     given only ``--fault``/``--retain`` is filed under the scenario built from them, neither
     under ``baseline``), and ``control``, true for a scenario's negative control; null in
     older files.
  10: cycles, what a scenario's client or restart mode measured (null where it did not run):
     ``stub_crashes`` (backend stubs that died of a signal of their own: SIGSEGV, SIGABRT, ...),
     ``in_flight`` (requests outstanding when ``stop()`` was called) and how they ended:
     ``in_flight_answered``, ``in_flight_failed``, ``in_flight_lost`` (no answer nor error by the
     end of the cycle); ``refused`` (requests refused at submission); ``loading_at_stop`` (models
     still loading when ``stop()`` was called); ``shm_bytes`` (bytes of files in /dev/shm when the
     load ended); ``traced_bytes`` (the worker's Python allocations, tracemalloc, when the load
     ended); ``rss_per_1k_requests_b``, ``traced_per_1k_requests_b`` (least-squares growth of the
     worker's RSS and Python allocations over the load, per 1,000 requests); ``ready_after_load``
     (whether the server and every model the load used still said ready when the load ended: a
     dead stub's model may). ``restart`` may be ``reload`` (one server; the models unloaded and
     loaded again each cycle).
  11: what sustained load did to the processes where the models live, and its verdict (cycles):
     ``growth_outcome`` (the third verdict: ok | leaking | slowing | not_measured,
     ``verdicts.GROWTH_OUTCOMES``), ``memory_samples`` (samples taken per process over the load),
     each process kind's memory growth per 1,000 requests by a Theil-Sen slope with its 95 %
     interval after the warm-up (``worker_growth_per_1k_b``/``_low_b``/``_high_b``, and per second
     of load ``worker_growth_per_s_b``; the stubs',
     per model, the largest: ``stub_growth_*`` and ``stub_growth_model``; ``gpu_growth_per_1k_b``),
     the requests they are read over (``growth_requests``), every process's in ``growth_by_process``
     (JSON ``{process: [per_1k, low, high]}``); the trend
     over the load's windows: ``throughput_change_pct``, ``p50_change_pct``, ``p99_change_pct``
     (Theil-Sen change from the load's start to its end, in % of the start), ``slowdown_pct`` and
     ``slowdown_low_pct`` (how much slower the end is than the start: p50's rise or throughput's
     fall, the larger, and its interval's lower bound), ``p50_us_per_1k`` and ``trend_windows``.
     The table ``memory``: every process's memory through the load, one row per process and sample
     (``MemoryRow``).
  12: cycles: ``shape``, the model shape the cycle served (``rig.scenarios.shapes``: unbatched, batched,
     instances-2, decoupled, joined with commas where several apply; a scenario's, the template
     model's, or read from a repository's config.pbtxt); null in older files (read: unbatched
     where a scenario ran).
  13: runs: the node's share of the machine (``rig.common.cpushare``): ``cpu_share`` (the CPUs the run
     could use: its affinity's, or a cgroup quota's where fewer), ``cpus`` (its affinity, as
     ``0-3,8``) and ``cpu_share_from`` (``--cpus``, ``cgroup``, ``affinity``, ``machine``); null
     in older files.
  14: windows, Triton's own statistics of the run's models over the window (``rig.contract.server_stats``;
     perf_analyzer's: its summary's averages; null with ``--server-stats off`` or a failed read): ``server_*``
     counts and summed ns, ``batch_sizes`` (JSON ``{size: executions}``) and ``mean_batch_size``.
  15: cycles, Triton's statistics of the cycle's models over the whole cycle, whether or not a
     window was measured: ``batch_sizes`` (JSON ``{size: executions}``, failed executions counted
     at their size), ``mean_batch_size``, ``server_executions`` and ``server_failures`` (requests
     Triton counted failed: a raising ``execute``'s); null where not read or older. And what a
     worker the parent SIGKILLed (the scenario ``worker-killed``) left, watched for 10 s after its
     death, then cleaned up: ``orphan_stubs`` (stubs alive once it was dead), ``orphan_stubs_gone_s``
     (until the last was gone; null: one outlived the bound), ``orphan_stubs_outlived`` (alive at
     the bound, killed), ``orphan_shm_regions`` (its server's regions in /dev/shm, removed),
     ``orphan_stubs_left`` and ``orphan_shm_left`` (after the cleanup); null in other cycles.
     And what the scenario ``ready-stub-dead`` asked once the load was over and the model's stub
     killed (its control: left alive): ``server_ready_at_probe`` and ``model_ready_at_probe``, the
     server's and the models' last answer to "ready?" over 2 s (``ready_after_load``: both);
     null in other cycles.
     And what the scenario ``sequence-at-stop`` left open at the stop (``rig.worker.clients.sequences``):
     ``sequences_open`` (sequences started and never ended), ``sequences_reaped`` (those the
     batcher's reaper ended after its idle timeout) and ``sequence_states_left`` (the states the
     model still held at its finalize); null in other cycles.
  16: the GPU path. windows: ``input_memory`` (where the rig's inputs lived: ``cpu`` or ``gpu:N``) and
     ``output_memory`` (where the responses' outputs lived, as the response allocator handed them out:
     ``cpu``, ``gpu:N``, or several joined by commas); cycles: ``input_copies`` (CPU inputs the CuPy
     model copied to its device, as it counted them; null where the model does not count) and
     ``gpu_memory_source`` (what the GPU memory figures read: ``process``, the cycle's own processes
     by PID, or ``device``, each visible device's used memory where the PIDs cannot match, in a
     container's PID namespace; null without a GPU); runs: ``gpu_notes`` (JSON ``{probe: reason}``:
     why a GPU probe gave null, each reason recorded once: NOT_SUPPORTED, MIG, no NVML library).
     cycles: ``stub_exit_aborts``, of the ``stub_crashes``, the stubs that died of a signal only after
     every instance they served had finished its finalize (an abort at the interpreter's exit), apart
     from a stub that crashed before or during the stop; null where no crash recorder was armed.
  17: windows: ``server_uncovered``, why Triton's statistics of the window's models cannot cover a
     request's life (``rig.contract.server_stats.uncovered_reason``): ``M is decoupled``, ``M answers after
     execute returns`` (an instance's ``execute`` returned None: the evidence hook's marker), joined
     with ``; ``; the client's time beyond Triton's is then not the rig's own. Null where every model
     answers inside ``execute``, where the statistics were not read, and in older files (where a
     window that streamed, ``responses`` set, reads as decoupled).
  18: runs: ``neighbour``, what a bench ran beside the node on its CPUs for the whole sweep
     (``rig.common.neighbour``): ``none`` or ``burn:PCT`` (a burner pinned to each CPU, busy PCT % of
     every 10 ms); null for other commands and in older files (which ran none).
  19: cycles: the official engine's ``tritonserver`` bindings, ``tritonserver_version`` (their version:
     a built runtime's own, compiled from its branch's ``core/python`` or PyPI's wheel of its
     version, else the environment's install, such as PyPI's 2.71.0 over an older core) and
     ``bindings_own`` (whether that is the core's release); null with the C API and in older files.
     runs: ``tritonserver_version`` is the same, the version the workers import (before 19: the
     environment's install, even where a built runtime's own bindings came first on the workers' path).
     fleet: ``host`` (the machine of a node's row, the master's on a round's total), ``master_cpu_s``
     and ``master_cpus`` (on a round's total: the master's CPU seconds over the load, and its CPUs).
     bisect: ``held`` (components held at the newer release's commit in a step), ``cause`` (a
     result's: ``one``, ``together`` or ``apart``) and ``effect`` (an ``apart`` result's move). All
     null in older files.
"""

SCHEMA_VERSION = 19  # see the history above
