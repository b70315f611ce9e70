"""`rig report` by topic: the page (``page``: groups, sections, Markdown and HTML), its rendering
(``html``), its sections (``parts``: lifecycle, performance, streaming, trends; ``differences``,
``growth``, ``scenarios``, ``server``). Pure functions over stored tables and plots."""
