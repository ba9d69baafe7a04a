"""Results of the experiment runners as a terminal or Markdown table, a JSON file and a plot.

Every runner produces a *document*: a JSON-ready dict with ``machine`` (see
:mod:`experiments.machine`), ``config`` and ``results``. This module only formats documents; it
measures nothing. The plot needs matplotlib (the ``plot`` extra) and imports it on demand.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from experiments.machine import machine_line
from experiments.sizes import format_bytes, format_count

_MEASURES = {"rss": "peak RSS growth", "arena": "arena reserved", "disk": "log + index files"}
_EXTRAPOLATED_MARK = "~"  # before a capacity extrapolated from bytes/entry (Markdown-safe)


def format_table(headers: list[str], rows: list[list[str]], *, markdown: bool = False) -> str:
    """Rows of cells as aligned text (first column left, the rest right) or a Markdown table."""
    if markdown:
        lines = ["| " + " | ".join(headers) + " |",
                 "|" + "|".join(["---"] + ["---:"] * (len(headers) - 1)) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]

    def line(cells):
        return "  ".join(cell.ljust(width) if i == 0 else cell.rjust(width)
                         for i, (cell, width) in enumerate(zip(cells, widths)))

    return "\n".join([line(headers), line(["-" * width for width in widths])]
                     + [line(row) for row in rows])


def write_json(document: dict, path: Path) -> None:
    path.write_text(json.dumps(document, indent=2) + "\n")


def _number(value, pattern: str) -> str:
    return "-" if value is None else format(value, pattern)


def capacity_rows(document: dict) -> tuple[list[str], list[list[str]], list[str]]:
    """Headers, rows and footnotes of the capacity table."""
    config = document["config"]
    with_memray = config.get("memray", False)
    headers = ["contender", "keys", "stop", "entries", "B/entry", "memory", "of budget",
               "measured as", "RSS peak growth"]
    headers += ["memray heap"] if with_memray else []
    headers += ["fill s", "inserts/s", "in 15 GiB (extrap.)", "MapDB in 15 GiB", "vs MapDB"]
    rows, notes = [], []
    for record in document["results"]:
        if "skipped" in record or "error" in record:
            problem = record.get("skipped") or "{type}: {message}".format(**record["error"])
            rows.append([record["label"], record["keys"], "skipped" if "skipped" in record
                         else "error"] + [""] * (len(headers) - 3))
            notes.append(f"{record['label']}: {problem.splitlines()[0]}")
            continue
        mark = "" if record["entries_in_budget_measured"] else _EXTRAPOLATED_MARK
        mapdb = record["mapdb"]
        mapdb_cell = "-"
        if mapdb is not None:
            mapdb_cell = format_count(mapdb["entries"])
            if mapdb["keys"] != record["keys"]:
                mapdb_cell += f" ({mapdb['keys']} keys)"
        row = [record["label"], record["keys"], record["stop"], f"{record['entries']:,}",
               _number(record["bytes_per_entry"], ".2f"), format_bytes(record["memory_bytes"]),
               f"{record['budget_used']:.0%}", _MEASURES[record["measured_by"]],
               format_bytes(record["peak_rss_growth_bytes"])]
        if with_memray:
            memray = record.get("memray")
            row.append(format_bytes(memray["heap_at_peak_bytes"]) if memray else "-")
        extrapolated = record["entries_in_15gib_extrapolated"]
        row += [f"{record['seconds']:.1f}", _number(record["inserts_per_second"], ",.0f"),
                (mark + format_count(extrapolated)) if extrapolated else "-", mapdb_cell,
                _number(record["ratio_to_mapdb"], ".2f")]
        rows.append(row)
        if record.get("stderr_tail"):
            notes.append(f"{record['label']}: the child wrote to stderr (see results.json): "
                         f"{record['stderr_tail'].strip().splitlines()[-1]}")
        if config["mode"] == "batch" and not record["bulk_api"]:
            notes.append(f"{record['label']}: no bulk insert API, so batch mode put one entry "
                         f"at a time")
        if mark:
            notes.append(f"{_EXTRAPOLATED_MARK} {record['label']}: stopped by {record['stop']} at "
                         f"{record['entries']:,} entries, "
                         f"{_number(record['bytes_per_entry'], '.2f')} B/entry; "
                         f"its capacity is extrapolated from that, not measured")
    return headers, rows, notes


def capacity_table(document: dict, *, markdown: bool = False) -> str:
    """The capacity results as a table with a title line and footnotes."""
    config = document["config"]
    headers, rows, notes = capacity_rows(document)
    title = (f"int64 -> \"\" entries within {format_bytes(config['budget_bytes'])}, "
             f"{config['mode']} inserts, time cap {config['max_seconds']:g} s per contender "
             f"({machine_line(document['machine'])})")
    parts = [title, "", format_table(headers, rows, markdown=markdown)]
    notes.append("in 15 GiB: a count measured at the budget is scaled by 15 GiB / budget; "
                 f"{_EXTRAPOLATED_MARK} marks a capacity extrapolated from bytes/entry instead")
    if document.get("interrupted"):
        notes.append("interrupted by Ctrl-C: later contenders did not run")
    if notes:
        parts += [""] + [f"- {note}" if markdown else note for note in notes]
    return "\n".join(parts)


def plot_capacity(document: dict, path: Path) -> None:
    """Entries within the budget per contender beside MapDB's figures scaled to the budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    budget = document["config"]["budget_bytes"]
    records = [r for r in document["results"] if "entries_in_budget" in r and r["entries_in_budget"]]
    labels = [f"{r['label']} ({'seq' if r['keys'] == 'sequential' else r['keys']})"
              for r in records]
    figure, axes = plt.subplots(figsize=(10, 1.8 + 0.6 * max(1, len(records))))
    positions = range(len(records))
    height = 0.38
    values = []
    for index, record in enumerate(records):
        measured = record["entries_in_budget_measured"]
        bars = [(index - height / 2, record["entries"], dict(color="tab:blue", label="measured"))]
        if not measured:  # the entries it reached, inside the capacity extrapolated from them
            bars.append((index - height / 2, record["entries_in_budget"],
                         dict(color="none", edgecolor="tab:blue", hatch="//",
                              label="extrapolated from a time-capped fill")))
        if record["mapdb"] is not None:
            bars.append((index + height / 2, record["mapdb"]["entries_scaled_to_budget"],
                         dict(color="tab:gray", label="MapDB's 15 GiB figure x budget / 15 GiB")))
        for position, value, style in bars:
            axes.barh(position, value, height, **style)
            axes.annotate(f" {format_count(value)}", (value, position), va="center",
                          fontsize="x-small")
            values.append(value)
    handles, names = axes.get_legend_handles_labels()
    unique = dict(zip(names, handles))
    axes.legend(unique.values(), unique.keys(), loc="upper center", bbox_to_anchor=(0.5, -0.22),
                ncol=3, fontsize="small", frameon=False)
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: format_count(value)))
    axes.set_yticks(list(positions), labels)
    axes.invert_yaxis()
    if values and max(values) > 30 * min(values):  # several decades: a log axis from a power of 10
        axes.set_xscale("log")
        axes.set_xlim(left=10 ** math.floor(math.log10(min(values))), right=max(values) * 4)
    else:
        axes.set_xlim(left=0, right=max(values, default=1) * 1.15)
    axes.set_xlabel(f"int64 -> \"\" entries within {format_bytes(budget)}")
    axes.set_title(f"Entries within {format_bytes(budget)}, "
                   f"{document['config']['mode']} inserts", fontsize="medium")
    figure.text(0.01, 0.005, machine_line(document["machine"]), fontsize="x-small", color="gray")
    figure.tight_layout(rect=(0, 0.03, 1, 1))
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _ratio(ours, theirs) -> str:
    """``ours / theirs`` with two significant digits at least (0.0047, 0.52, 3.10)."""
    if not ours or not theirs:
        return "-"
    ratio = ours / theirs
    return f"{ratio:.2f}" if ratio >= 0.1 else f"{ratio:.2g}"


def sparkey_tables(document: dict, *, markdown: bool = False) -> str:
    """The sparkey-bench lookups, appends and index builds, each beside sparkey-java's figures."""
    lookups = [[f"{r['n']:,}", r["compression"].upper(), _number(r["get_ops_per_second"], ",.0f"),
                _number(r["get_many_ops_per_second"], ",.0f"),
                _number(r["java_ops_per_second"], ",.0f"),
                _ratio(r["get_ops_per_second"], r["java_ops_per_second"]),
                format_bytes(r["log_bytes"] + r["index_bytes"])]
               for r in document["lookups"]]
    appends = [[r["size"], r["compression"].upper(), _number(r["ops_per_second"], ",.0f"),
                _number(r["java_ops_per_second"], ",.0f"),
                _ratio(r["ops_per_second"], r["java_ops_per_second"])]
               for r in document["appends"]]
    builds = {}
    for r in document["index_builds"]:
        builds.setdefault(r["n"], {})[r["method"]] = r
    index_rows = []
    for n, by_method in builds.items():
        row = [f"{n:,}"]
        for method in ("memory", "sorting"):
            record = by_method.get(method)
            row += ([_number(record["seconds"], ".3f"), _number(record["java_seconds"], ".3f")]
                    if record else ["-", "-"])
        index_rows.append(row)
    title = f"sparkey-bench ({machine_line(document['machine'])})"
    return "\n\n".join([
        title,
        "Random lookups (ops/s; Java: sparkey-java README, i7-7500U, JMH)\n" + format_table(
            ["N", "compression", "get", "get_many", "Java get", "get / Java", "log + index"],
            lookups, markdown=markdown),
        "Appends (ops/s)\n" + format_table(
            ["entry", "compression", "put", "Java put", "put / Java"], appends, markdown=markdown),
        "Index build (s per build)\n" + format_table(
            ["N", "memory", "Java in-memory", "sorting", "Java sorting"], index_rows,
            markdown=markdown),
    ])


_NO_BULK_MARK = "+"
_MAP_PAIRS = (("LongHashMap", "dict"), ("LongHashMap (pure)", "dict"), ("TreeMap", "dict"),
              ("TreeMap", "SortedDict"))


def maps_table(document: dict, *, markdown: bool = False) -> str:
    """maps-bench: ns per operation for every map, and speed ratios against dict and SortedDict."""
    results = document["results"]
    names = list(results)
    rows, fallback = [], False
    for operation in document["operations"]:
        row = [operation]
        for name in names:
            cell = results[name][operation]
            mark = "" if cell.get("bulk_api", True) else _NO_BULK_MARK
            fallback |= bool(mark)
            row.append(f"{cell['ns_per_op']:,.0f}{mark}")
        for ours, peer in _MAP_PAIRS:
            if ours in results and peer in results:
                row.append(_ratio(results[peer][operation]["seconds"], results[ours][operation]["seconds"]))
        rows.append(row)
    headers = ["operation"] + [f"{name} ns/op" for name in names]
    headers += [f"{ours} vs {peer}" for ours, peer in _MAP_PAIRS
                if ours in results and peer in results]
    config = document["config"]
    title = (f"maps-bench: {config['n']:,} {config['keys']} int64 keys, {config['value']} values "
             f"({machine_line(document['machine'])}); ratios are the peer's time / ours "
             f"(above 1: faster than the peer)")
    parts = [title, "", format_table(headers, rows, markdown=markdown)]
    if fallback:
        parts.append(f"\n{_NO_BULK_MARK} no bulk API for this operation: timed the idiomatic "
                     f"batch code (update(zip(...)), list(map(m.__getitem__, keys)), a del loop)")
    return "\n".join(parts)


def hashmap_goals_table(goals: dict, *, markdown: bool = False) -> str:
    """maps-bench's LongHashMap rows: ns per operation of dict and each core, the ratio of each
    core (ours / dict; bulk rows: times faster than a dict loop) and the goal and bar."""
    from experiments.hashmap_goals import GOALS, ratio

    seconds = goals["seconds_per_op"]
    cores = [name for name in seconds if name != "dict"]
    headers = ["measure", "keys", "dict ns"] + [f"{core} ns" for core in cores]
    headers += [f"{core} ratio" for core in cores] + ["goal", "must reach"]
    rows = []
    for goal in GOALS:
        n = goals["small"] if goal.size == "small" else goals["large"]
        peer = seconds["dict"][goal.name]
        row = [goal.name, format_count(n), f"{peer * 1e9:,.1f}"]
        row += [f"{seconds[core][goal.name] * 1e9:,.1f}" for core in cores]
        row += [f"{ratio(goal.name, seconds[core][goal.name], peer):.2f}x" for core in cores]
        rows.append(row + [goal.goal, goal.must])
    parts = [f"LongHashMap against dict, {goals['value']} values (fastest of {goals['repeat']} "
             f"rounds; ratio = ours / dict, bulk rows: dict loop / bulk call)", "",
             format_table(headers, rows, markdown=markdown)]
    size = goals.get("bytes_per_entry")
    if size:
        parts.append(f"\nbytes/entry, {format_count(size['n'])} random int64 -> \"\": "
                     f"{size['value']:.2f} (goal {size['goal']}, must reach {size['must']})")
    return "\n".join(parts)
