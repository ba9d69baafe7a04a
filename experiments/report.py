"""Results of the experiment runners as a terminal or Markdown table, a JSON file and a plot.

Every runner produces a *document*: a JSON-ready dict with ``machine`` (see
:mod:`experiments.machine`), ``config`` and ``results``. This module only formats documents; it
measures nothing. The plot needs matplotlib (the ``plot`` extra) and imports it on demand.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

from experiments.machine import machine_line
from experiments.sizes import format_bytes, format_count

_MEASURES = {"rss": "peak RSS growth", "arena": "arena reserved", "disk": "log + index files"}
_EXTRAPOLATED_MARK = "~"  # before a capacity extrapolated from bytes/entry (Markdown-safe)
TERMINAL_COLUMNS = 100
"""The terminal table and each of its legend lines fit this width."""
_STOP_SHOWN = {"budget": "budget", "time": "time", "rss-guard": "guard", "interrupted": "ctrl-c"}
_KEYS_SHOWN = {"sequential": "seq", "random": "rand"}
_LEGEND = (
    "legend:",
    "  keys      seq: 0, 1, 2, ... in order; rand: uniformly random signed int64 keys",
    "  stop      why the fill ended: budget reached, time cap, guard (RSS safety stop), ctrl-c",
    "  B/entry   memory / entries",
    "  memory    what the budget bounds: RSS growth (dict, SortedDict), arena (offheap), files "
    "(Sparkey)",
    "  peak RSS  the most the process's resident memory grew while filling",
    f"  15 GiB    entries in 15 GiB: count x 15 GiB / budget, or {_EXTRAPOLATED_MARK} 15 GiB / "
    "B/entry if stopped early",
    "  vs MapDB  15 GiB / MapDB's count in 15 GiB for the same map (see the plot, results.json)",
)
_OVER_BUDGET = {
    "arena": "limit= bounds the arena; the process also holds what lives outside it: the "
             "numpy temporaries of a hash table's doubling, a TreeMap's caches of decoded and "
             "dirty nodes, the fill loop's Python objects",
    "disk": "the budget bounds the log and index files; the process also holds the writer's "
            "buffers and the arrays of the index build, which runs in memory",
    "rss": "the budget bounds the RSS growth after each step; the peak includes the step that "
           "crossed the budget (a dict resize holds two tables for a moment)",
}


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


def capacity_rows(document: dict, *, wide: bool = True) -> tuple[list[str], list[list[str]],
                                                               list[str]]:
    """Headers, rows and footnotes of the capacity table.

    ``wide`` (Markdown, docs) has every figure; the narrow form (the terminal) keeps the
    columns that fit TERMINAL_COLUMNS, with short names the legend explains.
    """
    config = document["config"]
    with_memray = config.get("memray", False) and wide
    if wide:
        headers = ["contender", "keys", "stop", "entries", "B/entry", "memory", "of budget",
                   "measured as", "RSS peak growth"]
        headers += ["memray heap"] if with_memray else []
        headers += ["fill s", "inserts/s", "in 15 GiB (extrap.)", "MapDB in 15 GiB", "vs MapDB"]
    else:
        headers = ["contender", "keys", "stop", "entries", "B/entry", "memory", "peak RSS",
                   "15 GiB", "vs MapDB"]
    rows, notes = [], []
    for record in document["results"]:
        if "skipped" in record or "error" in record:
            problem = record.get("skipped") or "{type}: {message}".format(**record["error"])
            rows.append([record["label"], _shown_keys(record["keys"], wide),
                         "skipped" if "skipped" in record else "error"]
                        + [""] * (len(headers) - 3))
            notes.append(f"{record['label']}: {problem.splitlines()[0]}")
            continue
        rows.append(_wide_row(record, with_memray) if wide else _narrow_row(record))
        notes += _record_notes(record, config, wide)
    return headers, rows, notes


def _shown_keys(keys: str, wide: bool) -> str:
    return keys if wide else _KEYS_SHOWN.get(keys, keys)


def _capacity_cell(record: dict) -> str:
    mark = "" if record["entries_in_budget_measured"] else _EXTRAPOLATED_MARK
    extrapolated = record["entries_in_15gib_extrapolated"]
    return (mark + format_count(extrapolated)) if extrapolated else "-"


def _wide_row(record: dict, with_memray: bool) -> list[str]:
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
    return row + [f"{record['seconds']:.1f}", _number(record["inserts_per_second"], ",.0f"),
                  _capacity_cell(record), mapdb_cell, _number(record["ratio_to_mapdb"], ".2f")]


def _narrow_row(record: dict) -> list[str]:
    return [record["label"], _shown_keys(record["keys"], False),
            _STOP_SHOWN.get(record["stop"], record["stop"]), f"{record['entries']:,}",
            _number(record["bytes_per_entry"], ".2f"), format_bytes(record["memory_bytes"]),
            format_bytes(record["peak_rss_growth_bytes"]), _capacity_cell(record),
            _number(record["ratio_to_mapdb"], ".2f")]


def _record_notes(record: dict, config: dict, wide: bool) -> list[str]:
    """Footnotes of one measured record: stderr, batch fallback, over-budget peak, extrapolation."""
    notes = []
    label = record["label"]
    if record.get("stderr_tail"):
        notes.append(f"{label}: the child wrote to stderr (see results.json): "
                     f"{record['stderr_tail'].strip().splitlines()[-1]}")
    if config["mode"] == "batch" and not record["bulk_api"]:
        notes.append(f"{label}: no bulk insert API, so batch mode put one entry at a time")
    budget = config["budget_bytes"]
    if record["peak_rss_growth_bytes"] > budget:
        notes.append(f"{label}: peak RSS {format_bytes(record['peak_rss_growth_bytes'])} is "
                     f"above the {format_bytes(budget)} budget: "
                     f"{_OVER_BUDGET[record['measured_by']]}")
    if not record["entries_in_budget_measured"]:
        notes.append(f"{_EXTRAPOLATED_MARK} {label}: stopped by {record['stop']} at "
                     f"{record['entries']:,} entries, "
                     f"{_number(record['bytes_per_entry'], '.2f')} B/entry; "
                     f"its capacity is extrapolated from that, not measured")
    if not wide and record.get("memray"):
        notes.append(f"{label}: memray heap at the peak "
                     f"{format_bytes(record['memray']['heap_at_peak_bytes'])}")
    return notes


def capacity_table(document: dict, *, markdown: bool = False) -> str:
    """The capacity results with a title line and footnotes.

    Markdown (for docs) has every column; the terminal form fits TERMINAL_COLUMNS columns, its
    footnotes wrapped to that width, and ends with a legend of one line per term.
    """
    config = document["config"]
    headers, rows, notes = capacity_rows(document, wide=markdown)
    title = (f"int64 -> \"\" entries within {format_bytes(config['budget_bytes'])}, "
             f"{config['mode']} inserts, time cap {config['max_seconds']:g} s per contender")
    parts = [title, f"({machine_line(document['machine'])})", "",
             format_table(headers, rows, markdown=markdown)]
    if markdown:
        notes.append("in 15 GiB: a count measured at the budget is scaled by 15 GiB / budget; "
                     f"{_EXTRAPOLATED_MARK} marks a capacity extrapolated from bytes/entry "
                     "instead")
    if document.get("interrupted"):
        notes.append("interrupted by Ctrl-C: later contenders did not run")
    if document.get("failed"):
        failed = document["failed"]
        notes.append(f"the runner failed during {failed['contender']} ({failed['type']}: "
                     f"{failed['message']}): later contenders did not run")
    if markdown:
        parts += [""] + [f"- {note}" for note in notes]
    else:
        parts += [""] + [textwrap.fill(note, TERMINAL_COLUMNS, subsequent_indent="  ")
                         for note in notes]
        parts += [""] + list(_LEGEND)
    return "\n".join(parts)


_STOPPED_EARLY_BY = {"time": "the time cap", "interrupted": "Ctrl-C", "rss-guard": "the RSS guard"}


def plot_capacity(document: dict, path: Path) -> None:
    """Entries within the budget per contender beside MapDB's figures scaled to the budget.

    A fill that stopped before the budget is drawn solid up to the entries it reached and
    hatched up to the capacity extrapolated from its bytes/entry; the legend names what
    stopped it. Each bar has one value label, past its end; the legend sits below the axis
    label, in a layout that keeps them apart.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    budget = document["config"]["budget_bytes"]
    records = [r for r in document["results"] if "entries_in_budget" in r and r["entries_in_budget"]]
    labels = [f"{r['label']} ({'seq' if r['keys'] == 'sequential' else r['keys']})"
              for r in records]
    figure, axes = plt.subplots(figsize=(10, 2.2 + 0.6 * max(1, len(records))),
                                layout="constrained")
    height = 0.38
    values = []
    for index, record in enumerate(records):
        ours = index - height / 2
        axes.barh(ours, record["entries"], height, color="tab:blue", label="measured")
        reached = record["entries"]
        label = format_count(reached)
        if not record["entries_in_budget_measured"]:  # the entries reached, inside the estimate
            axes.barh(ours, record["entries_in_budget"], height, color="none",
                      edgecolor="tab:blue", hatch="//", label=extrapolated_label(record))
            reached = max(reached, record["entries_in_budget"])
            label = (f"{format_count(record['entries'])} reached, "
                     f"~{format_count(record['entries_in_budget'])} estimated")
        _value_label(axes, reached, ours, label)
        values += [record["entries"], reached]
        if record["mapdb"] is not None:
            mapdb = record["mapdb"]["entries_scaled_to_budget"]
            axes.barh(index + height / 2, mapdb, height, color="tab:gray",
                      label="MapDB's 15 GiB figure x budget / 15 GiB")
            _value_label(axes, mapdb, index + height / 2, format_count(mapdb))
            values.append(mapdb)
    handles, names = axes.get_legend_handles_labels()
    unique = dict(zip(names, handles))
    figure.legend(unique.values(), unique.keys(), loc="outside lower center", ncol=3,
                  fontsize="small", frameon=False)
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: format_count(value)))
    axes.set_yticks(range(len(records)), labels)
    axes.invert_yaxis()
    if values and max(values) > 30 * min(values):  # several decades: a log axis from a power of 10
        axes.set_xscale("log")
        axes.set_xlim(left=10 ** math.floor(math.log10(min(values))), right=max(values) * 40)
    else:
        axes.set_xlim(left=0, right=max(values, default=1) * 1.5)
    axes.set_xlabel(f"int64 -> \"\" entries within {format_bytes(budget)}")
    axes.set_title(f"Entries within {format_bytes(budget)}, "
                   f"{document['config']['mode']} inserts", fontsize="medium")
    figure.suptitle(machine_line(document["machine"]), fontsize="x-small", color="gray")
    figure.savefig(path, dpi=120)
    plt.close(figure)


def extrapolated_label(record: dict) -> str:
    """The legend entry of a capacity extrapolated from a fill that stopped before the budget."""
    stopped_by = _STOPPED_EARLY_BY.get(record["stop"], record["stop"])
    return f"extrapolated from a fill stopped by {stopped_by}"


def _value_label(axes, value: float, position: float, text: str) -> None:
    """``text`` just past the end of a bar, on the white of the axes, never on the bar."""
    axes.annotate(text, (value, position), xytext=(3, 0), textcoords="offset points",
                  va="center", fontsize="x-small")


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


def keyed_goals_table(goals: dict, *, markdown: bool = False) -> str:
    """maps-bench's HashMap(key="str") rows: ns per operation of dict and the map on each core
    (each core timed beside its own dict, on its own number of keys), ratio ours / dict, the
    goal and the bar; then bytes per entry against dict's."""
    from experiments.keyed_goals import GOALS

    seconds = goals["seconds_per_op"]
    headers = ["measure"]
    for core in seconds:
        headers += [f"keys ({core})", f"dict ns ({core})", f"HashMap ns ({core})",
                    f"ratio ({core})"]
    rows = []
    for goal in GOALS:
        row = [goal.name]
        for core, cells in seconds.items():
            peer, ours = cells["dict"][goal.name], cells[core][goal.name]
            row += [format_count(goals["n"][core]), f"{peer * 1e9:,.1f}", f"{ours * 1e9:,.1f}",
                    f"{ours / peer:.2f}x"]
        rows.append(row + [goal.goal, goal.must])
    parts = [f"HashMap(key=\"str\") against dict, keys user:DDDDDDD -> \"\" (fastest of "
             f"{goals['repeat']} rounds; ratio = ours / dict)", "",
             format_table(headers + ["goal", "must reach"], rows, markdown=markdown)]
    size = goals.get("bytes_per_entry")
    if size:
        parts.append(f"\nbytes/entry at {format_count(size['n'])} keys: HashMap "
                     f"{size['HashMap']:.2f}, dict {size['dict']:.2f}: "
                     f"{size['HashMap'] / size['dict']:.2f}x (goal {size['goal']}, must reach "
                     f"{size['must']})")
    return "\n".join(parts)


def treemap_goals_table(goals: dict, *, markdown: bool = False) -> str:
    """maps-bench's TreeMap rows: ns per operation of SortedDict and TreeMap on each code path
    (each path timed its own SortedDict), the ratio ours / SortedDict, the goal and the bar."""
    from experiments.treemap_goals import GOALS, ratio

    paths = goals["paths"]
    headers = ["measure"]
    for path in paths:
        headers += [f"SortedDict ns ({path})", f"TreeMap ns ({path})", f"ratio ({path})"]
    rows = []
    for goal in GOALS:
        row = [goal.name]
        for result in paths.values():
            seconds = result["seconds_per_op"]
            peer, ours = seconds["SortedDict"][goal.name], seconds["TreeMap"][goal.name]
            row += [f"{peer * 1e9:,.0f}", f"{ours * 1e9:,.0f}", f"{ratio(ours, peer):.2f}x"]
        rows.append(row + [goal.goal, goal.must])
    parts = [f"TreeMap against SortedDict, {format_count(goals['large'])} random int64 keys, "
             f"{format_count(goals['ops'])} operations a row (fastest of {goals['repeat']} "
             f"rounds; ratio = ours / SortedDict)", "",
             format_table(headers + ["goal", "must reach"], rows, markdown=markdown)]
    for path, result in paths.items():
        sizes = ", ".join(f"{name}: {value:.2f}" for name, value in result["bytes_per_entry"].items())
        parts.append(f"\nbytes/entry ({path}): {sizes}")
    return "\n".join(parts)
