"""``python -m catalog.spark``: the Spark plugin's control plane for one catalog (see catalog.spark.control)."""

from catalog.spark.control import main

main()
