"""The capacity report read by someone who never saw the code: width, legend, explanations.

``capacity_64mib.json`` is a real run (``--budget 64MiB --max-seconds 6``, every contender).
"""

import json
from pathlib import Path

import pytest

from experiments import report
from experiments.capacity import CapacityConfig, nearest_stop, progress_text

DOCUMENT = json.loads((Path(__file__).parent / "capacity_64mib.json").read_text())


def _records():
    return {record["name"]: record for record in DOCUMENT["results"]}


def test_the_terminal_table_fits_100_columns():
    lines = report.capacity_table(DOCUMENT).splitlines()
    assert max(map(len, lines)) <= report.TERMINAL_COLUMNS
    header = next(line for line in lines if line.startswith("contender"))
    assert header.split() == ["contender", "keys", "stop", "entries", "B/entry", "memory",
                              "peak", "RSS", "15", "GiB", "vs", "MapDB"]


def test_the_legend_has_one_line_per_term():
    lines = report.capacity_table(DOCUMENT).splitlines()
    legend = lines[lines.index("legend:") + 1:]
    terms = [line.split("  ")[1] for line in legend]
    assert terms == ["keys", "stop", "B/entry", "memory", "peak RSS", "15 GiB", "vs MapDB"]
    assert all(line.startswith("  ") and len(line) <= report.TERMINAL_COLUMNS for line in legend)


def test_peaks_over_the_budget_are_explained_where_shown():
    records = _records()
    budget = DOCUMENT["config"]["budget_bytes"]
    over = {name for name, record in records.items() if record["peak_rss_growth_bytes"] > budget}
    assert over == {"longhashmap", "sparkey"}
    text = report.capacity_table(DOCUMENT)
    assert "LongHashMap: peak RSS 68.7 MiB is above the 64.0 MiB budget: limit= bounds the " \
           "arena" in text.replace("\n  ", " ")
    assert "Sparkey (log + index): peak RSS 302.2 MiB is above the 64.0 MiB budget: the " \
           "budget bounds the log and index files" in text.replace("\n  ", " ")
    assert "dict: peak RSS" not in text


def test_the_markdown_table_keeps_every_column():
    text = report.capacity_table(DOCUMENT, markdown=True)
    assert "| RSS peak growth | fill s | inserts/s |" in text and "legend:" not in text


def test_an_interrupted_fill_is_not_called_time_capped(tmp_path):
    document = json.loads(json.dumps(DOCUMENT))
    record = next(r for r in document["results"] if r["name"] == "longhashmap")
    record["stop"] = "interrupted"
    assert report.extrapolated_label(record) == "extrapolated from a fill stopped by Ctrl-C"
    row = next(line for line in report.capacity_table(document).splitlines()
               if line.startswith("LongHashMap"))
    assert row.split()[2] == "ctrl-c"
    pytest.importorskip("matplotlib")
    report.plot_capacity(document, tmp_path / "capacity.png")
    assert (tmp_path / "capacity.png").read_bytes()[:4] == b"\x89PNG"


def test_a_progress_bar_follows_the_nearer_stop():
    config = CapacityConfig(budget_bytes=64 << 20, keys="sequential", mode="scalar",
                            max_seconds=10)
    early_in_time = {"memory_bytes": 48 << 20, "seconds": 2.0, "entries": 1000}
    assert nearest_stop(early_in_time, config) == ("budget", 0.75)
    slow = {"memory_bytes": 1 << 20, "seconds": 9.0, "entries": 5}
    assert nearest_stop(slow, config) == ("time", 0.9)
    assert progress_text(slow, config, "time") == "to time: 1.0 MiB/64.0 MiB, 9/10 s, 5 entries"
