"""Shared data for the catalog tests."""

import pyarrow as pa

ORDERS = pa.schema([("id", pa.int64()), ("day", pa.string()), ("amount", pa.float64())])


def orders(ids: list[int], day: str = "mon", amount: float = 1.0) -> pa.Table:
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "day": [day] * len(ids), "amount": [amount] * len(ids)}, schema=ORDERS
    )
