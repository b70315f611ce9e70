"""`rig report` by topic: the page (``page``: groups, sections, Markdown and HTML), its rendering
(``html``, and ``render``: read, filter, build), its sections (``parts``: lifecycle, performance,
streaming, trends; ``differences``, ``growth``, ``scenarios``, ``server``) and the conformance grid as
`rig report --conformance` prints it (``conformance_grid``). Pure functions over stored tables and plots."""
