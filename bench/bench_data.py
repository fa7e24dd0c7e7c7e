"""The benchmark's data set, shared by the seeding script and the hand-written server (no Django here)."""

STATUSES = ["new", "paid", "shipped", "cancelled"]


def rows(count: int) -> list[dict]:
    return [
        {
            "id": i,
            "customer": f"customer-{i % 97}",
            "status": STATUSES[i % 4],
            "total": round((i * 37) % 1000 + 0.5, 2),
            "items": i % 7 + 1,
        }
        for i in range(1, count + 1)
    ]
