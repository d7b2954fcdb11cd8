"""Devices a plan leaves idle on its nodes (pure), and the nearest layouts that use them."""

from __future__ import annotations


def idle_warning(used_per_node: list[int], devices_per_node: int, tp: int, pp: int, dp: int) -> str | None:
    """The warning for a plan whose nodes have unused devices, or ``None``.

    Args:
        used_per_node: devices the plan uses on each node.
        devices_per_node: devices each node has (hardware catalogue).
        tp / pp / dp: the plan's layout.

    Returns:
        One line: the idle count per node and the nearest layouts that use every device (more DP ranks of the same
        TP, or a TP that fills a node), ``None`` when no device is idle.
    """
    idle = [devices_per_node - used for used in used_per_node]
    if not any(idle):
        return None
    nodes, total = len(used_per_node), devices_per_node * len(used_per_node)
    layouts = []
    if total % (tp * pp) == 0:
        layouts.append(f"TP{tp}{f' × PP{pp}' if pp > 1 else ''} × DP{total // (tp * pp)} "
                       f"({devices_per_node // (tp * pp) or 1} DP rank(s) per node)")
    if devices_per_node % pp == 0 and devices_per_node // pp != tp and total // devices_per_node >= 1:
        layouts.append(f"TP{devices_per_node // pp}{f' × PP{pp}' if pp > 1 else ''} × DP{nodes} (one DP rank per node)")
    where = (f"{idle[0]} of {devices_per_node} devices idle on each of {nodes} node(s)" if len(set(idle)) == 1
             else f"{sum(idle)} of {total} devices idle ({idle} per node)")
    return (f"{where} with TP{tp} × PP{pp} × DP{dp}; nearest layouts that use them: {'; '.join(layouts)} "
            f"(memory and KV change: recompile to compare)")
