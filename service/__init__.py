"""``lakekv serve``: the store over HTTP (KV/transaction API, health, metrics).

Entry points: :func:`service.app.create_app` (the ASGI app) and
:func:`service.cli.run_serve` (``lakekv serve``). Nothing is imported here,
so ``kvstore.cli`` can register the subcommand without loading Starlette.
"""
