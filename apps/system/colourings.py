"""The topology page's "network load" colouring: switches and global links by the switch port counters."""
from apps.core.link_colourings import LinkColouring, LinkLoads, register_link_colouring


def network_link_loads(user) -> LinkLoads | None:
    from .selectors import system_network

    answer = system_network(user)
    load, summary = answer["_load"], answer["network"]
    if load is None or not load.pairs:
        return None
    notes = {(row["a"], row["b"]): (f"{row['gb_per_s']} GB/s on {row['links']} links"
                                    + (f"; jobs {', '.join(row['jobs'][:4])}" if row["jobs"] else ""))
             for row in summary["busiest"]}
    return LinkLoads(pairs={pair: value.fraction for pair, value in load.pairs.items() if value.fraction is not None},
                     switches=dict(load.switches), verdict=summary["verdict"], coverage=summary["note"], notes=notes)


def register() -> None:
    register_link_colouring(LinkColouring(key="network", title="network load", order=5, loads=network_link_loads))
