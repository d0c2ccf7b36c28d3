"""The params room: typed parameters of every stage (``config``: ``Params``, ``load_params``; the sections in
``*_sections``, the vocabularies in ``vocab``), the params.yaml format (``file``), the named profiles
(``profiles``) and what a served run needs (``served``). It imports nothing of the factory but
``factory.utils``: the rooms above it import it, never the other way round (tests/test_imports.py).
"""
