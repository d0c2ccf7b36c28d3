"""What every part of the factory shares: errors, files and JSON (io), the project's paths, text
normalisation, progress bars, plots, and the bootstrap statistics; and the two small programs the
Makefile runs (``where``: what a run produced; ``dvc_plots``: the offline plots page)."""
