"""What every part of the factory shares: errors, files and JSON (io), the project's paths, text
normalisation, the train/held-out/test splits, the official answer metrics, progress bars, plots and the
bootstrap statistics; and the two small programs the Makefile runs (``where``: what a run produced;
``dvc_plots``: the offline plots page)."""
