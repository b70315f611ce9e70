"""The conformance table by topic: its cells (``cells``), the table built from the stored cycles
(``table``), the order it lists things in (``order``), the batch sizes (``batches``), where a row
changed (``changes``), its figures, text and HTML (``figures``, ``text``, ``html``), its findings
(``findings``) and the upgrade question (``diff``, ``diff_text``), grouped by cause (``causes``: a
bisected commit, a change of the official API's ``bindings``, a significant change of ``rates``).
Pure functions over stored tables."""
