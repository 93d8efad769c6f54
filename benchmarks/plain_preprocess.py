"""The preprocess a user would write without the workbench: a plain pandas script, a plain
DuckDB SQL script and a plain Polars script (in memory, or on Polars' streaming engine), the
references of ``benchmarks/preprocess_scaling.py`` (issues 48 and 69).

Each does the preprocess stage's work on a Criteo ``train.txt`` or an Avazu ``train`` CSV and
nothing more: read every row; the test split (Criteo: the last 10% of the rows; Avazu: the last
10% in time, ties in file order); per categorical column the vocabulary of the train rows'
tokens seen at least ``min_count`` times, ids 1..K in sorted token order (0: missing, rare or
unseen); dense ``log1p(max(x, 0))`` as float32, missing 0; ``train.parquet`` and
``test.parquet`` (zstd).
What they leave out is what the stage adds: row validation with file and line, bounded memory
on inputs larger than RAM (but for DuckDB's limit and Polars' streaming engine), the row-group
layout and the metadata. Each prints one JSON line: rows per split and the vocabulary sizes
(the benchmark checks them against the stage's).

Usage: python benchmarks/plain_preprocess.py {pandas,duckdb,polars,polars_streaming}
       {criteo_tsv,avazu_csv} INPUT OUTDIR
       [--min-count 3] [--memory-limit-mb 2048]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

CRITEO_DENSE = [f"I{i}" for i in range(1, 14)]
CRITEO_CATEGORICAL = [f"C{i}" for i in range(1, 27)]
AVAZU_HEADER = ["id", "click", "hour", "C1", "banner_pos", "site_id", "site_domain",
                "site_category", "app_id", "app_domain", "app_category", "device_id",
                "device_ip", "device_model", "device_type", "device_conn_type", "C14", "C15",
                "C16", "C17", "C18", "C19", "C20", "C21"]
AVAZU_CATEGORICAL = [*AVAZU_HEADER[3:], "hour_of_day", "weekday"]
TEST_FRACTION = 0.1


def with_pandas(fmt: str, path: Path, out: Path, min_count: int) -> dict:
    """read_csv, sort_values by time (Avazu), value_counts + sorted vocabularies, get_indexer
    codes, to_parquet."""
    import numpy as np
    import pandas as pd

    if fmt == "criteo_tsv":
        names = ["label", *CRITEO_DENSE, *CRITEO_CATEGORICAL]
        df = pd.read_csv(path, sep="\t", header=None, names=names,
                         dtype={c: str for c in CRITEO_CATEGORICAL})
        for c in CRITEO_DENSE:
            x = df[c].clip(lower=0).fillna(0).astype(np.float64)
            df[c] = np.log1p(x).astype(np.float32)
        categorical = CRITEO_CATEGORICAL
    else:
        df = pd.read_csv(path, dtype=str).rename(columns={"click": "label"})
        df["label"] = df["label"].astype(np.int8)
        hour = pd.to_datetime(df.pop("hour"), format="%y%m%d%H", utc=True)
        df["timestamp"] = hour.astype("int64") // 10**9
        df["hour_of_day"] = hour.dt.strftime("%H")
        df["weekday"] = hour.dt.day_of_week.astype(str)
        df = df.drop(columns="id").sort_values("timestamp", kind="stable",
                                               ignore_index=True)
        categorical = AVAZU_CATEGORICAL
    cut = len(df) - int(round(len(df) * TEST_FRACTION))
    sizes = {}
    for c in categorical:
        counts = df[c].iloc[:cut].value_counts()
        vocab = np.sort(counts.index[counts >= min_count].to_numpy(dtype=object))
        df[c] = (pd.Index(vocab).get_indexer(df[c]) + 1).astype(np.int32)
        sizes[c] = len(vocab)
    out.mkdir(parents=True, exist_ok=True)
    df.iloc[:cut].to_parquet(out / "train.parquet", compression="zstd", index=False)
    df.iloc[cut:].to_parquet(out / "test.parquet", compression="zstd", index=False)
    return {"rows": {"train": cut, "test": len(df) - cut}, "vocabulary": sizes}


def with_duckdb(fmt: str, path: Path, out: Path, min_count: int, memory_limit_mb: int) -> dict:
    """read_csv into a table, one ranked vocabulary per column (GROUP BY ... HAVING, row_number
    over the sorted tokens), LEFT JOINs, COPY ... TO parquet."""
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET memory_limit = '{memory_limit_mb}MB'")
    if fmt == "criteo_tsv":
        columns = {"label": "TINYINT", **{c: "BIGINT" for c in CRITEO_DENSE},
                   **{c: "VARCHAR" for c in CRITEO_CATEGORICAL}}
        con.execute(f"""CREATE TABLE raw AS SELECT row_number() OVER () AS _pos, *
            FROM read_csv('{path}', delim='\t', header=false, columns={columns!r})""")
        categorical = CRITEO_CATEGORICAL
        features = ", ".join(f"CAST(ln(1 + greatest(coalesce({c}, 0), 0)) AS FLOAT) AS {c}"
                             for c in CRITEO_DENSE)
    else:
        con.execute(f"""CREATE TABLE src AS SELECT row_number() OVER () AS _row, *
            FROM read_csv('{path}', header=true, all_varchar=true)""")
        con.execute("""CREATE TABLE raw AS SELECT
            row_number() OVER (ORDER BY ts, _row) AS _pos, * EXCLUDE (id, click, hour, ts),
            CAST(click AS TINYINT) AS label, epoch(ts)::BIGINT AS timestamp,
            strftime(ts, '%H') AS hour_of_day, CAST(isodow(ts) - 1 AS VARCHAR) AS weekday
            FROM (SELECT *, strptime(hour, '%y%m%d%H') AS ts FROM src)""")
        con.execute("DROP TABLE src")
        categorical = AVAZU_CATEGORICAL
        features = "timestamp"
    n = con.execute("SELECT count(*) FROM raw").fetchone()[0]
    cut = n - int(round(n * TEST_FRACTION))
    sizes = {}
    for c in categorical:
        con.execute(f"""CREATE TABLE v_{c} AS SELECT {c} AS token,
            row_number() OVER (ORDER BY {c}) AS id FROM raw
            WHERE _pos <= {cut} AND {c} IS NOT NULL GROUP BY {c} HAVING count(*) >= {min_count}""")
        sizes[c] = con.execute(f"SELECT count(*) FROM v_{c}").fetchone()[0]
    ids = ", ".join(f"coalesce(v_{c}.id, 0)::INTEGER AS {c}" for c in categorical)
    joins = " ".join(f"LEFT JOIN v_{c} ON raw.{c} = v_{c}.token" for c in categorical)
    out.mkdir(parents=True, exist_ok=True)
    for split, where in (("train", f"_pos <= {cut}"), ("test", f"_pos > {cut}")):
        con.execute(f"""COPY (SELECT label, {features}, {ids} FROM raw {joins}
            WHERE {where} ORDER BY _pos) TO '{out / split}.parquet'
            (FORMAT parquet, COMPRESSION zstd)""")
    return {"rows": {"train": cut, "test": n - cut}, "vocabulary": sizes}


def with_polars(fmt: str, path: Path, out: Path, min_count: int,
                streaming: bool = False) -> dict:
    """One lazy plan: scan_csv, sort by time (Avazu, stable), per column the train rows' tokens
    counted, filtered, sorted and numbered, a left join per column, a parquet per split.
    ``streaming=False`` reads the file into memory once and runs the plan there;
    ``streaming=True`` runs it on Polars' streaming engine (bounded memory; the file is read
    again by each pass: the count, the vocabularies, each split). Polars' threads: as many as
    ``POLARS_MAX_THREADS`` says (the benchmark compares CPU seconds)."""
    import polars as pl

    engine = "streaming" if streaming else "in-memory"
    if fmt == "criteo_tsv":
        schema = {"label": pl.Int8, **{c: pl.Int64 for c in CRITEO_DENSE},
                  **{c: pl.String for c in CRITEO_CATEGORICAL}}
        lf = pl.scan_csv(path, separator="\t", has_header=False, schema=schema).with_columns(
            [pl.col(c).clip(lower_bound=0).fill_null(0).cast(pl.Float64).log1p()
             .cast(pl.Float32) for c in CRITEO_DENSE])
        categorical = CRITEO_CATEGORICAL
    else:
        hour = (pl.col("hour") + "00").str.strptime(  # Polars wants a minute with an hour
            pl.Datetime("us", "UTC"), "%y%m%d%H%M")
        lf = pl.scan_csv(path, infer_schema=False).rename({"click": "label"}).with_columns(
            pl.col("label").cast(pl.Int8), hour.dt.epoch("s").alias("timestamp"),
            hour.dt.strftime("%H").alias("hour_of_day"),
            (hour.dt.weekday() - 1).cast(pl.String).alias("weekday"),
        ).drop("id", "hour").sort("timestamp", maintain_order=True)
        categorical = AVAZU_CATEGORICAL
    if not streaming:
        lf = lf.collect().lazy()
    n = int(lf.select(pl.len()).collect(engine=engine).item())
    cut = n - int(round(n * TEST_FRACTION))
    lf = lf.with_row_index("_pos")
    train = lf.filter(pl.col("_pos") < cut)
    vocabs = pl.collect_all(
        [train.select(c).drop_nulls().group_by(c).len(name="n")
         .filter(pl.col("n") >= min_count).select(c).sort(c)
         .with_row_index(f"{c}__id", offset=1) for c in categorical], engine=engine)
    sizes = {c: vocab.height for c, vocab in zip(categorical, vocabs, strict=True)}
    for c, vocab in zip(categorical, vocabs, strict=True):
        lf = lf.join(vocab.lazy().with_columns(pl.col(f"{c}__id").cast(pl.Int32)), on=c,
                     how="left", maintain_order="left").with_columns(
            pl.col(f"{c}__id").fill_null(0).alias(c)).drop(f"{c}__id")
    out.mkdir(parents=True, exist_ok=True)
    splits = {"train": pl.col("_pos") < cut, "test": pl.col("_pos") >= cut}
    pl.collect_all([lf.filter(where).drop("_pos").sink_parquet(
        out / f"{split}.parquet", compression="zstd", lazy=True)
        for split, where in splits.items()], engine=engine)
    return {"rows": {"train": cut, "test": n - cut}, "vocabulary": sizes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tool", choices=["pandas", "duckdb", "polars", "polars_streaming"])
    parser.add_argument("format", choices=["criteo_tsv", "avazu_csv"])
    parser.add_argument("input", type=Path)
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--min-count", type=int, default=3)
    parser.add_argument("--memory-limit-mb", type=int, default=2048)
    args = parser.parse_args()
    if args.tool == "pandas":
        result = with_pandas(args.format, args.input, args.outdir, args.min_count)
    elif args.tool.startswith("polars"):
        result = with_polars(args.format, args.input, args.outdir, args.min_count,
                             streaming=args.tool == "polars_streaming")
    else:
        result = with_duckdb(args.format, args.input, args.outdir, args.min_count,
                             args.memory_limit_mb)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
