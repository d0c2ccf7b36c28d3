"""One module per DVC stage, in data-flow order (the number in the file name is the order).

Each module is a thin ``run(params, **options)`` over library code: it reads its inputs, calls
the library, writes its outputs and metrics. ``COMMAND`` names the ``factory`` subcommand.
"""
