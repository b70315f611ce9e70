"""`rig capacity` by topic: the plan (``plan``: the most a node sustains under a p99 bound, the
nodes a target needs), a sweep as it reads it (``sweep``), what a node is (``tags``), the fleet
check (``fleet``) and how nodes add up (``law``), the command's study of a store (``study``), its
text (``text``) and figure (``plot``). Pure functions over stored windows."""
